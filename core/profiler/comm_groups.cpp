// The groups a rank's collectives run on, and how a profiler tells which one a collective used.
#include "core/profiler/profiler.h"

#include <algorithm>

namespace remat {

std::vector<CommGroup> layout_groups(const Communicator* dp, const Communicator* tp, const Communicator* pp,
                                     const Communicator* tie) {
  const int tp_size = tp ? tp->size() : 1, tp_rank = tp ? tp->rank() : 0;
  const int dp_size = dp ? dp->size() : 1, dp_rank = dp ? dp->rank() : 0;
  const int pp_size = pp ? pp->size() : 1, pp_rank = pp ? pp->rank() : 0;
  auto global = [&](int p, int d, int t) { return (p * dp_size + d) * tp_size + t; };
  std::vector<CommGroup> g;
  if (dp) {
    CommGroup d{dp, {}};
    for (int i = 0; i < dp_size; ++i) d.ranks.push_back(global(pp_rank, i, tp_rank));
    g.push_back(std::move(d));
  }
  if (tp) {
    CommGroup t{tp, {}};
    for (int i = 0; i < tp_size; ++i) t.ranks.push_back(global(pp_rank, dp_rank, i));
    g.push_back(std::move(t));
  }
  if (pp) {
    CommGroup p{pp, {}};
    for (int i = 0; i < pp_size; ++i) p.ranks.push_back(global(i, dp_rank, tp_rank));
    g.push_back(std::move(p));
  }
  if (tie) g.push_back({tie, {global(0, dp_rank, tp_rank), global(pp_size - 1, dp_rank, tp_rank)}});
  return g;
}

void Profiler::note_comm_start() {
  counts_.resize(groups_.size());
  for (std::size_t i = 0; i < groups_.size(); ++i) counts_[i] = groups_[i].comm->records().size();
}

std::vector<std::int32_t> Profiler::comm_ranks() const {
  for (std::size_t i = 0; i < groups_.size() && i < counts_.size(); ++i)
    if (groups_[i].comm->records().size() > counts_[i]) {
      const CommRecord& r = groups_[i].comm->records().back();
      if (r.peer < 0) return groups_[i].ranks;
      // A send or receive: this rank and its peer, ascending.
      const std::int32_t self = groups_[i].ranks[static_cast<std::size_t>(groups_[i].comm->rank())];
      const std::int32_t peer = groups_[i].ranks[static_cast<std::size_t>(r.peer)];
      return {std::min(self, peer), std::max(self, peer)};
    }
  return {};
}

}  // namespace remat
