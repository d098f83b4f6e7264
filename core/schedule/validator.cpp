#include "core/schedule/validator.h"

#include <algorithm>

#include "core/schedule/block_state.h"

namespace remat {

ScheduleStats validate_schedule(const Schedule& s, const BlockGraph& g) {
  ScheduleState state(g, s);
  ScheduleStats st;
  for (std::size_t i = 0; i < s.actions.size(); ++i) {
    const ActionEffect e = state.apply(i, s.actions[i]);
    switch (e.kind) {
      case ActionKind::Forward:
      case ActionKind::Recompute:
        ++st.block_forwards;
        if (e.recompute) {
          st.flops_recompute += e.flops;
        } else {
          st.flops_forward += e.flops;
          ++st.first_forwards;
        }
        break;
      case ActionKind::Backward:
        st.flops_backward += e.flops;
        for (const InnerRecompute& r : e.inner) st.flops_recompute += r.flops;
        break;
      case ActionKind::Offload: ++st.offloads; break;
      case ActionKind::Prefetch: ++st.prefetches; break;
      case ActionKind::Drop: break;
    }
    st.max_checkpoints = std::max(st.max_checkpoints, state.checkpoints());
  }
  state.finish(s.actions.size());
  return st;
}

}  // namespace remat
