// The optimal policy's default without a memory budget: the fewest saved bytes a block can keep
// when no weight GEMM (a linear layer's matmul) runs again, as a minimum cut of its table, by
// Boost Graph's Boykov-Kolmogorov max-flow. (AOTAutograd's min-cut partitioner is the same kind
// of cut but also bans re-running batched matmuls and fused attention; this one re-runs the
// attention core, as Korthikanti et al. do.)
//
// The network: a node per step and two per tensor (in, out). The source side of a cut is what
// the forward made and the backward does not run again; the sink side is what the backward
// needs. A tensor's in -> out edge costs its bytes when it may be kept (a saved tensor; the
// block input is free) and is uncuttable otherwise; a step feeds its tensors' in nodes, a
// tensor's out node feeds the steps reading it, every saved tensor's out node feeds the sink,
// and the source feeds the weight GEMMs and the block input (they never run again). A finite
// cut keeps exactly the saved tensors whose in -> out edge it crosses, and every step on the sink
// side can run again from what is kept: a minimum cut keeps the fewest bytes. Of the minimum
// cuts, the one with the largest source side reruns the fewest steps (an inclusion-minimal set).
#pragma once
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>

#include <cstdint>
#include <deque>
#include <vector>

#include "core/graph/block_graph.h"
#include "core/util/error.h"
#include "plugins/budget/budget_chain.h"

namespace remat::optimal {

struct MinCut {
  budget::Mask keep = 0;    // the saved tensors kept (the block input included)
  std::uint64_t bytes = 0;  // their bytes: the cut's value plus the input's
};

inline MinCut min_cut(const BlockGraph& g) {
  budget::require_mask_width(g, "optimal");
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using Graph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS,
      boost::property<boost::vertex_index_t, long,
                      boost::property<boost::vertex_color_t, boost::default_color_type,
                                      boost::property<boost::vertex_distance_t, long,
                                                      boost::property<boost::vertex_predecessor_t, Traits::edge_descriptor>>>>,
      boost::property<boost::edge_capacity_t, long long,
                      boost::property<boost::edge_residual_capacity_t, long long,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  const auto& T = g.tensors();
  const auto& S = g.steps();
  const long nt = static_cast<long>(T.size()), ns = static_cast<long>(S.size());
  // Vertices: source 0, sink 1, steps 2.., tensors' in then out nodes.
  const long src = 0, snk = 1;
  auto step_v = [&](long s) { return 2 + s; };
  auto in_v = [&](long t) { return 2 + ns + 2 * t; };
  auto out_v = [&](long t) { return 3 + ns + 2 * t; };
  Graph net(static_cast<std::size_t>(2 + ns + 2 * nt));
  auto cap = boost::get(boost::edge_capacity, net);
  auto rev = boost::get(boost::edge_reverse, net);
  auto res = boost::get(boost::edge_residual_capacity, net);
  long long inf = 1;
  for (const TensorDef& t : T) inf += static_cast<long long>(t.bytes);
  auto edge = [&](long u, long v, long long c) {
    auto e = boost::add_edge(static_cast<std::size_t>(u), static_cast<std::size_t>(v), net).first;
    auto r = boost::add_edge(static_cast<std::size_t>(v), static_cast<std::size_t>(u), net).first;
    cap[e] = c;
    cap[r] = 0;
    rev[e] = r;
    rev[r] = e;
  };
  for (long s = 0; s < ns; ++s)
    if (S[static_cast<std::size_t>(s)].kind == StepKind::Gemm) edge(src, step_v(s), inf);
  for (long t = 0; t < nt; ++t) {
    const TensorDef& d = T[static_cast<std::size_t>(t)];
    if (t == g.input()) {
      edge(src, in_v(t), inf);
      edge(in_v(t), out_v(t), 0);
    } else {
      edge(step_v(d.producer), in_v(t), inf);
      edge(in_v(t), out_v(t), d.saved ? static_cast<long long>(d.bytes) : inf);
    }
    for (int c : d.consumers) edge(out_v(t), step_v(c), inf);
    if (d.saved) edge(out_v(t), snk, inf);
  }
  boost::boykov_kolmogorov_max_flow(net, static_cast<std::size_t>(src), static_cast<std::size_t>(snk));
  // The sink side of the minimum cut with the largest source side: what still reaches the sink
  // through edges with capacity left.
  const std::size_t nv = boost::num_vertices(net);
  std::vector<std::vector<std::size_t>> into(nv);
  for (auto [e, end] = boost::edges(net); e != end; ++e)
    if (res[*e] > 0) into[boost::target(*e, net)].push_back(boost::source(*e, net));
  std::vector<bool> sink_side(nv, false);
  std::deque<std::size_t> q{static_cast<std::size_t>(snk)};
  sink_side[static_cast<std::size_t>(snk)] = true;
  while (!q.empty()) {
    const std::size_t v = q.front();
    q.pop_front();
    for (std::size_t u : into[v])
      if (!sink_side[u]) {
        sink_side[u] = true;
        q.push_back(u);
      }
  }
  MinCut out;
  for (long t = 0; t < nt; ++t) {
    const TensorDef& d = T[static_cast<std::size_t>(t)];
    if (!d.saved) continue;
    if (t == g.input() || (!sink_side[static_cast<std::size_t>(in_v(t))] && sink_side[static_cast<std::size_t>(out_v(t))])) {
      out.keep |= budget::bit(static_cast<int>(t));
      out.bytes += d.bytes;
    }
  }
  return out;
}

}  // namespace remat::optimal
