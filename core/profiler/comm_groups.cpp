// The groups a rank's collectives run on, and how a profiler tells which one a collective used.
#include "core/profiler/profiler.h"

namespace remat {

std::vector<CommGroup> layout_groups(const Communicator* dp, const Communicator* tp) {
  const int tp_size = tp ? tp->size() : 1, tp_rank = tp ? tp->rank() : 0;
  const int dp_size = dp ? dp->size() : 1, dp_rank = dp ? dp->rank() : 0;
  std::vector<CommGroup> g;
  if (dp) {
    CommGroup d{dp, {}};
    for (int i = 0; i < dp_size; ++i) d.ranks.push_back(i * tp_size + tp_rank);
    g.push_back(std::move(d));
  }
  if (tp) {
    CommGroup t{tp, {}};
    for (int i = 0; i < tp_size; ++i) t.ranks.push_back(dp_rank * tp_size + i);
    g.push_back(std::move(t));
  }
  return g;
}

void Profiler::note_comm_start() {
  counts_.resize(groups_.size());
  for (std::size_t i = 0; i < groups_.size(); ++i) counts_[i] = groups_[i].comm->records().size();
}

std::vector<std::int32_t> Profiler::comm_ranks() const {
  for (std::size_t i = 0; i < groups_.size() && i < counts_.size(); ++i)
    if (groups_[i].comm->records().size() > counts_[i]) return groups_[i].ranks;
  return {};
}

}  // namespace remat
