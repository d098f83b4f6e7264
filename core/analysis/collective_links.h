// Which collectives of a run of several ranks are one and the same exchange: the flows a trace
// viewer draws between a collective and its partners on the other ranks. Each rank records its
// collectives on the comm stream with the global ranks of their group (OpRecord::ranks); the
// k-th collective of a name on a group on one rank is the k-th of that name on that group on
// every other member (each rank runs the same ops in the same order). A point-to-point transfer
// pairs a send with the receive of the same name on its peer ("pp.activation.send" on stage s
// with "pp.activation.recv" on stage s + 1, "pp.grad.*" the other way; the peer is the other
// member of a group of two, else the next or previous member in the activation's or gradient's
// direction).
//
// Times are on each rank's own clock from the start of its last counted step, as the Ranks page
// aligns its lanes (rank_lanes.h). An exchange's last member to arrive (the latest start) is the
// one the others waited for: its arrows go from its start to each partner's end, the moment the
// partner was released; a transfer's arrow goes from the send's start to the receive's end.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

struct FlowEnd {
  int rank = 0;
  std::uint32_t op = 0;  // index into that rank's Trace::ops
};

struct Flow {
  FlowEnd from, to;
  std::int64_t from_ns = 0, to_ns = 0;  // on the aligned axis
  std::uint32_t link = 0;  // index into CollectiveLinks::links
};

struct CollectiveLink {
  std::vector<FlowEnd> members;  // in rank order
  std::size_t last = 0;          // the member that arrived last (or the sender)
  bool point_to_point = false;
};

struct CollectiveLinks {
  std::vector<CollectiveLink> links;
  std::vector<Flow> flows;  // by min(from_ns, to_ns)
  std::int64_t longest = 0;  // the widest flow's |to_ns - from_ns|, to search by time
  // Collectives whose partners are not all there (a rank missing, a group the trace does not
  // name): counted, never linked to the wrong op.
  std::size_t unmatched = 0;
  // The link of a rank's op; -1 when none.
  std::int64_t link_of(int rank, std::uint32_t op) const;
  std::vector<std::vector<std::int32_t>> by_rank;  // by_rank[rank][op]: the link, or -1
  // Flows that may cross [t0, t1] (both ends' span meets it).
  std::vector<const Flow*> flows_in(std::int64_t t0, std::int64_t t1) const;
};

// `ranks[i]` is rank i's trace (null for a rank that left none).
CollectiveLinks collective_links(const std::vector<const Trace*>& ranks);

}  // namespace remat
