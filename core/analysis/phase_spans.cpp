#include "core/analysis/phase_spans.h"

#include <algorithm>

namespace remat {

std::vector<PhaseSpan> phase_spans(const Trace& t) {
  std::vector<PhaseSpan> out;
  std::vector<const OpRecord*> ops;
  ops.reserve(t.ops.size());
  for (const auto& o : t.ops)
    if (o.stream == Stream::Compute || o.stream == Stream::Host) ops.push_back(&o);
  if (ops.empty())
    for (const auto& o : t.ops) ops.push_back(&o);
  std::stable_sort(ops.begin(), ops.end(), [](const OpRecord* a, const OpRecord* b) { return a->start_ns < b->start_ns; });
  for (const OpRecord* o : ops) {
    if (!out.empty() && out.back().phase == o->phase) {
      out.back().end_ns = std::max(out.back().end_ns, o->end_ns);
      continue;
    }
    if (!out.empty()) out.back().end_ns = std::max(out.back().end_ns, std::min(o->start_ns, out.back().end_ns));
    out.push_back({o->phase, o->start_ns, o->end_ns});
  }
  // Close the gaps: each span runs to the start of the next.
  for (std::size_t i = 0; i + 1 < out.size(); ++i) out[i].end_ns = std::max(out[i].end_ns, out[i + 1].start_ns);
  return out;
}

}  // namespace remat
