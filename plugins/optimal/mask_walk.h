// A block table as bit masks, so that the optimal policy can walk every one of its 2^n choices
// quickly: each step's inputs, outputs and backward reads as masks (and as the lists the walks
// visit in order), each tensor's bytes, and scratch buffers reused from walk to walk. The walks
// are budget_chain.h's walk_forward and optimal_options.h's walk_backward, figure for figure
// (tests compare every choice of several tables), without allocating.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/graph/block_graph.h"
#include "core/util/error.h"
#include "plugins/budget/budget_chain.h"

namespace remat::optimal {

class MaskTable {
 public:
  using Mask = budget::Mask;

  explicit MaskTable(const BlockGraph& g)
      : in_(g.input()), out_(g.output()), nt_(g.tensors().size()), last_need_(g.last_need()) {
    budget::require_mask_width(g, "optimal");
    for (const TensorDef& t : g.tensors()) bytes_.push_back(t.bytes);
    saved_ = budget::saved_mask(g);
    for (const StepDef& sd : g.steps()) {
      Step st;
      st.ins = sd.in;
      st.outs = sd.out;
      st.needs_list = sd.needs;
      for (int t : sd.in) st.in |= budget::bit(t);
      for (int t : sd.out) st.out |= budget::bit(t);
      for (int t : sd.needs) st.needs |= budget::bit(t);
      st.mask_op = sd.op == OpKind::DropoutMask;
      steps_.push_back(std::move(st));
    }
    last_use_.assign(nt_, -1);  // per tensor, the last step of the current run reading it
    run_.reserve(steps_.size());
  }

  Mask saved() const { return saved_; }
  int input() const { return in_; }

  std::uint64_t bytes(Mask m) const {
    std::uint64_t b = 0;
    for (; m; m &= m - 1) b += bytes_[static_cast<std::size_t>(__builtin_ctzll(m))];
    return b;
  }

  // BlockGraph::recompute_flops: the steps (ascending) that make `targets` from `live`, into
  // *run; false when they would need the block input and it is not live.
  bool steps_for(Mask live, Mask targets, std::vector<int>* run) const {
    Mask needed = targets & ~live;
    run->clear();
    for (int s = static_cast<int>(steps_.size()) - 1; s >= 0; --s) {
      const Step& st = steps_[static_cast<std::size_t>(s)];
      if (!(st.out & needed)) continue;
      run->push_back(s);
      needed |= st.in & ~live;
    }
    if (((needed & ~live) >> in_) & 1u) return false;
    std::reverse(run->begin(), run->end());
    return true;
  }

  // budget::walk_forward; adds the cost of each step it runs to *cost (in step order) when given.
  budget::Walk forward(Mask live, Mask keep, bool recompute_only, bool produce, bool checkpoint,
                       const std::vector<double>* step_cost = nullptr, double* cost = nullptr) const {
    using budget::bit;
    const Mask targets = (recompute_only ? (keep & ~bit(in_)) : keep) | (produce ? bit(out_) : 0);
    if (!steps_for(live, targets, &run_)) return {~std::uint64_t{0}, ~std::uint64_t{0}};
    Mask stays = recompute_only ? (live | targets) : (keep & saved_);
    if (!recompute_only && checkpoint) stays |= bit(in_);
    for (int s : run_) {
      if (cost) *cost += (*step_cost)[static_cast<std::size_t>(s)];
      for (int t : steps_[static_cast<std::size_t>(s)].ins) last_use_[static_cast<std::size_t>(t)] = s;
    }
    std::uint64_t now = bytes(live);
    budget::Walk w{now, 0};
    Mask held = live, temp = 0;
    for (int s : run_) {
      const Step& st = steps_[static_cast<std::size_t>(s)];
      for (int t : st.outs) {
        now += bytes_[static_cast<std::size_t>(t)];
        if ((held >> t) & 1u) temp |= bit(t);
        else held |= bit(t);
      }
      w.peak = std::max(w.peak, now);
      auto done = [&](int t) {
        if (t == out_ || ((stays >> t) & 1u)) return;
        if ((temp >> t) & 1u) {
          temp &= ~bit(t);
          now -= bytes_[static_cast<std::size_t>(t)];
        } else if ((held >> t) & 1u) {
          held &= ~bit(t);
          now -= bytes_[static_cast<std::size_t>(t)];
        }
      };
      for (int t : st.ins)
        if (last_use_[static_cast<std::size_t>(t)] == s) done(t);
      for (int t : st.outs)
        if (last_use_[static_cast<std::size_t>(t)] < s) done(t);
    }
    // Back to -1 for the next walk (entries of tensors no step of this run reads stayed -1).
    for (int s : run_)
      for (int t : steps_[static_cast<std::size_t>(s)].ins) last_use_[static_cast<std::size_t>(t)] = -1;
    w.end = bytes(held & ~bit(out_));
    return w;
  }

  // walk_backward (optimal_options.h): the peak of the held and rebuilt bytes; the cost of each
  // step a rebuild group runs is appended to *adds, in the order walk_backward adds them.
  std::uint64_t backward(Mask held, Mask inside, std::vector<double>* adds, const std::vector<double>& step_cost) const {
    using budget::bit;
    std::uint64_t now = bytes(held), peak = now;
    Mask live = held, pending = inside;
    adds->clear();
    for (int s = static_cast<int>(steps_.size()) - 1; s >= 0; --s) {
      const Step& sd = steps_[static_cast<std::size_t>(s)];
      if (sd.mask_op) continue;
      const Mask w = sd.needs & pending;
      if (w) {
        if (!steps_for(live, w, &run_)) throw Error("internal: a rebuild inside the backward needs the block input");
        Mask targets = 0, mine = 0;
        for (int st : run_) {
          adds->push_back(step_cost[static_cast<std::size_t>(st)]);
          for (int t : steps_[static_cast<std::size_t>(st)].ins) last_use_[static_cast<std::size_t>(t)] = st;
          targets |= steps_[static_cast<std::size_t>(st)].out & pending;
        }
        for (int st : run_) {
          const Step& rd = steps_[static_cast<std::size_t>(st)];
          for (int t : rd.outs) {
            now += bytes_[static_cast<std::size_t>(t)];
            mine |= bit(t);
          }
          peak = std::max(peak, now);
          auto done = [&](int t) {
            if (!((mine >> t) & 1u) || ((targets >> t) & 1u)) return;
            now -= bytes_[static_cast<std::size_t>(t)];
            mine &= ~bit(t);
          };
          for (int t : rd.ins)
            if (last_use_[static_cast<std::size_t>(t)] == st) done(t);
          for (int t : rd.outs)
            if (last_use_[static_cast<std::size_t>(t)] < st) done(t);
        }
        for (int st : run_)
          for (int t : steps_[static_cast<std::size_t>(st)].ins) last_use_[static_cast<std::size_t>(t)] = -1;
        pending &= ~targets;
        live |= targets;
      }
      for (int t : sd.needs_list)
        if (last_need_[static_cast<std::size_t>(t)] == s && ((live >> t) & 1u)) {
          live &= ~bit(t);
          now -= bytes_[static_cast<std::size_t>(t)];
        }
    }
    return peak;
  }

 private:
  struct Step {
    Mask in = 0, out = 0, needs = 0;
    std::vector<int> ins, outs, needs_list;
    bool mask_op = false;  // a dropout mask's step: its backward reads nothing
  };
  int in_, out_;
  std::size_t nt_;
  std::vector<int> last_need_;
  std::vector<std::uint64_t> bytes_;
  Mask saved_ = 0;
  std::vector<Step> steps_;
  mutable std::vector<int> last_use_, run_;
};

}  // namespace remat::optimal
