// The optimal policy's choices for one block table, every one of them: which saved tensors the
// block keeps from its forward, and how it rebuilds the others: inside its backward (schedule
// version 2), after a forward that keeps them or after a checkpointed forward (only the input
// kept) and a recompute of them; or all at once before its backward (as selective and budget's
// selective option do). Each choice is walked on bytes in the
// executor's own order (core/engine/executor_block.cpp, the rebuild groups of
// ScheduleState::plan_inside), giving the chain figures of budget_dp.h; the choices no other
// choice beats in all of kept bytes, peak and cost are the block's front.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph/block_graph.h"
#include "core/util/error.h"
#include "plugins/budget/budget_chain.h"
#include "plugins/budget/budget_dp.h"
#include "plugins/optimal/mask_walk.h"

namespace remat::optimal {

using budget::bit;
using budget::Mask;
using budget::OptionCost;

// Tables with more recomputable tensors than this are refused (2^n choices are walked).
inline constexpr int kMaxChoiceTensors = 20;

enum class Mode : std::uint8_t {
  Inside,      // forward keep=K, backward [the others]
  Checkpoint,  // forward keep=input, recompute keep=K, backward [the others]
  Before,      // forward keep=K, recompute keep=all, backward
};

struct Choice {
  Mode mode = Mode::Inside;
  Mask keep = 0;            // K: saved tensors kept from the forward (Checkpoint: from the recompute); the input included
  Mask inside = 0;          // saved tensors rebuilt inside the backward (the saved set minus K; none Before)
  Mask offload = 0;         // held tensors in host memory between the forward and the backward (offload_sets.h);
                            // a choice with offloads is a middle block's (its `last` is the one without)
  OptionCost mid, last;     // as a middle block and as the last one (the head beside it)
  std::vector<bool> reruns; // per step of the table: whether the choice runs it again
};

// Executor::backward on bytes, from a block holding `held` (a subset of the saved set) that
// rebuilds `inside` within: the groups plan_inside makes, each allocated step by step and its
// helpers freed after their last reader in the group, the held tensors freed after their last
// backward reader. Adds the groups' step costs to *cost; the peak of the held and rebuilt bytes.
inline std::uint64_t walk_backward(const BlockGraph& g, Mask held, Mask inside,
                                   const std::vector<double>& step_cost, double* cost,
                                   std::vector<bool>* reruns = nullptr) {
  const auto& T = g.tensors();
  const auto& S = g.steps();
  const std::size_t nt = T.size();
  std::uint64_t now = budget::mask_bytes(g, held), peak = now;
  Mask live = held, pending = inside;
  std::vector<bool> lv(nt), want(nt);
  std::vector<int> run, last_use(nt);
  for (int s = static_cast<int>(S.size()) - 1; s >= 0; --s) {
    const StepDef& sd = S[static_cast<std::size_t>(s)];
    if (sd.op == OpKind::DropoutMask) continue;
    Mask w = 0;
    for (int t : sd.needs)
      if ((pending >> t) & 1u) w |= bit(t);
    if (w) {
      for (std::size_t t = 0; t < nt; ++t) {
        lv[t] = (live >> t) & 1u;
        want[t] = (w >> t) & 1u;
      }
      run.clear();
      if (!g.recompute_flops(lv, want, &run)) throw Error("internal: a rebuild inside the backward needs the block input");
      Mask targets = 0, mine = 0;
      std::fill(last_use.begin(), last_use.end(), -1);
      for (int st : run) {
        *cost += step_cost[static_cast<std::size_t>(st)];
        if (reruns) (*reruns)[static_cast<std::size_t>(st)] = true;
        for (int t : S[static_cast<std::size_t>(st)].in) last_use[static_cast<std::size_t>(t)] = st;
        for (int t : S[static_cast<std::size_t>(st)].out)
          if ((pending >> t) & 1u) targets |= bit(t);
      }
      for (int st : run) {
        const StepDef& rd = S[static_cast<std::size_t>(st)];
        for (int t : rd.out) {
          now += T[static_cast<std::size_t>(t)].bytes;
          mine |= bit(t);
        }
        peak = std::max(peak, now);
        auto done = [&](int t) {
          if (!((mine >> t) & 1u) || ((targets >> t) & 1u)) return;
          now -= T[static_cast<std::size_t>(t)].bytes;
          mine &= ~bit(t);
        };
        for (int t : rd.in)
          if (last_use[static_cast<std::size_t>(t)] == st) done(t);
        for (int t : rd.out)
          if (last_use[static_cast<std::size_t>(t)] < st) done(t);
      }
      pending &= ~targets;
      live |= targets;
    }
    for (int t : sd.needs)
      if (g.last_need()[static_cast<std::size_t>(t)] == s && ((live >> t) & 1u)) {
        live &= ~bit(t);
        now -= T[static_cast<std::size_t>(t)].bytes;
      }
  }
  return peak;
}

// The figures of one choice (see Choice).
inline Choice evaluate(const BlockGraph& g, const std::vector<double>& cost, Mode mode, Mask keep) {
  const bool checkpoint = mode == Mode::Checkpoint;
  const ModelConfig& m = g.config();
  const int in = g.input();
  const Mask saved = budget::saved_mask(g);
  Choice c;
  c.mode = mode;
  c.reruns.assign(g.steps().size(), false);
  c.keep = keep | bit(in);
  c.inside = mode == Mode::Before ? 0 : saved & ~c.keep;
  const OuterSizes outer(m);
  const std::uint64_t final_in = static_cast<std::uint64_t>(outer.final_in) * m.act_size();
  const std::uint64_t lnf = static_cast<std::uint64_t>(outer.lnf_out) * m.act_size();
  double total = 0.0;
  budget::Walk f = budget::walk_forward(g, bit(in), checkpoint ? bit(in) : c.keep, false, true, checkpoint);
  std::uint64_t rec_peak = 0;
  if (mode != Mode::Inside) {
    // The recompute before the backward: from the input to K, or from K to the whole saved set.
    const Mask from = checkpoint ? bit(in) : c.keep, to = checkpoint ? c.keep : saved;
    budget::Walk r = budget::walk_forward(g, from, to, true, false, false);
    rec_peak = r.peak;
    std::vector<bool> lv(g.tensors().size()), tg(g.tensors().size());
    for (std::size_t t = 0; t < tg.size(); ++t) {
      lv[t] = (from >> t) & 1u;
      tg[t] = ((to & ~from) >> t) & 1u;
    }
    std::vector<int> steps;
    g.recompute_flops(lv, tg, &steps);
    for (int s : steps) {
      total += cost[static_cast<std::size_t>(s)];
      c.reruns[static_cast<std::size_t>(s)] = true;
    }
  }
  const Mask held_set = mode == Mode::Before ? saved : c.keep;  // when the backward starts
  const std::uint64_t bwd = walk_backward(g, held_set, c.inside, cost, &total, &c.reruns);
  const std::uint64_t held = budget::mask_bytes(g, held_set);
  c.mid.kept = f.end;
  c.mid.fwd_peak = f.peak;
  c.mid.bwd_peak = std::max(rec_peak, bwd);
  c.mid.cost = total;
  c.last = c.mid;
  // The last block: its output waits for the head through its recompute; the head holds the
  // final norm's output beside what the block holds, and frees both before the block's backward.
  c.last.bwd_peak = std::max({mode != Mode::Inside ? final_in + rec_peak : 0, final_in + held + lnf, bwd});
  return c;
}

// Choice c with `off` (tensors it holds between its forward and backward) in host memory meanwhile:
// it keeps their bytes fewer and costs `per_byte` more per byte offloaded (out and back: offload_sets.h).
inline Choice offloaded(const BlockGraph& g, Choice c, Mask off, double per_byte) {
  const std::uint64_t bytes = budget::mask_bytes(g, off);
  c.offload = off;
  c.mid.kept -= bytes;
  c.mid.cost += per_byte * static_cast<double>(bytes);
  return c;
}

// The table's recomputable tensors: saved, not the block's input (the choices are their subsets).
inline std::vector<int> free_tensors(const BlockGraph& g) {
  std::vector<int> free;
  for (std::size_t t = 0; t < g.tensors().size(); ++t)
    if (g.tensors()[t].saved && static_cast<int>(t) != g.input()) free.push_back(static_cast<int>(t));
  return free;
}

// Every choice of table g: keep any subset K of the saved tensors besides the input, in each
// mode (Checkpoint without K = the input alone, which is Inside's; Before without K = the whole
// saved set, which is Inside's too). Each choice's figures are evaluate()'s, cost sums included
// (added in the same order), walked on the table's masks (mask_walk.h) with what the modes share
// walked once: Inside and Before run the same forward, Inside and Checkpoint the same backward,
// every Checkpoint the same forward and every Before the same backward. `visit(choice, order)`
// sees each in turn, `reruns` left empty (evaluate() gives it for one choice); order rises
// along the walk (3 K + the mode's index).
template <typename Visit>
void for_each_choice(const BlockGraph& g, const std::vector<double>& cost, Visit&& visit) {
  const std::vector<int> free = free_tensors(g);
  budget::require_mask_width(g, "optimal");
  if (static_cast<int>(free.size()) > kMaxChoiceTensors)
    throw Error("the optimal policy tries every choice of a block's recomputable tensors, and this block has " +
                std::to_string(free.size()) + " (at most " + std::to_string(kMaxChoiceTensors) +
                "): plan without --memory-budget (the minimum cut) or with the budget policy");
  const MaskTable mt(g);
  const ModelConfig& m = g.config();
  const OuterSizes outer(m);
  const std::uint64_t final_in = static_cast<std::uint64_t>(outer.final_in) * m.act_size();
  const std::uint64_t lnf = static_cast<std::uint64_t>(outer.lnf_out) * m.act_size();
  const Mask in = bit(g.input()), saved = mt.saved();
  const std::uint64_t saved_bytes = mt.bytes(saved);
  // Shared by every K: a checkpoint's forward, and the backward after rebuilding everything.
  const budget::Walk f_ckpt = mt.forward(in, in, false, true, true);
  std::vector<double> before_adds, adds;
  const std::uint64_t before_bwd = mt.backward(saved, 0, &before_adds, cost);
  auto finish = [&](Choice& c, const budget::Walk& f, std::uint64_t rec_peak, std::uint64_t bwd, double total,
                    const std::vector<double>& bwd_adds, std::uint64_t held) {
    for (double a : bwd_adds) total += a;
    c.mid.kept = f.end;
    c.mid.fwd_peak = f.peak;
    c.mid.bwd_peak = std::max(rec_peak, bwd);
    c.mid.cost = total;
    c.last = c.mid;
    c.last.bwd_peak =
        std::max({c.mode != Mode::Inside ? final_in + rec_peak : 0, final_in + held + lnf, bwd});
  };
  const std::uint64_t n = std::uint64_t{1} << free.size();
  for (std::uint64_t k = 0; k < n; ++k) {
    Mask keep = in;
    for (std::size_t i = 0; i < free.size(); ++i)
      if ((k >> i) & 1u) keep |= bit(free[i]);
    const budget::Walk f = mt.forward(in, keep, false, true, false);
    const std::uint64_t bwd = mt.backward(keep, saved & ~keep, &adds, cost);
    const std::uint64_t held = mt.bytes(keep);
    Choice c;
    c.keep = keep;
    c.inside = saved & ~keep;
    c.mode = Mode::Inside;
    finish(c, f, 0, bwd, 0.0, adds, held);
    visit(c, 3 * k);
    if (k != 0) {
      c.mode = Mode::Checkpoint;
      double total = 0.0;
      const budget::Walk r = mt.forward(in, keep, true, false, false, &cost, &total);
      finish(c, f_ckpt, r.peak, bwd, total, adds, held);
      visit(c, 3 * k + 1);
    }
    if (k + 1 < n) {
      c.mode = Mode::Before;
      c.inside = 0;
      double total = 0.0;
      const budget::Walk r = mt.forward(keep, saved, true, false, false, &cost, &total);
      finish(c, f, r.peak, before_bwd, total, before_adds, saved_bytes);
      visit(c, 3 * k + 2);
    }
  }
}

// Every choice of table g (for_each_choice), in its order.
inline std::vector<Choice> all_choices(const BlockGraph& g, const std::vector<double>& cost) {
  std::vector<Choice> out;
  for_each_choice(g, cost, [&](const Choice& c, std::uint64_t) { out.push_back(c); });
  return out;
}

// Whether a beats or equals b in every figure that counts: as the last block, what it keeps
// afterwards does not (nothing comes after it).
inline bool covers(const OptionCost& a, const OptionCost& b, bool last = false) {
  return (last || a.kept <= b.kept) && a.peak() <= b.peak() && a.cost <= b.cost;
}

// The choices no other beats (one of each set of equal ones), as a middle or the last block,
// cheapest first.
inline std::vector<Choice> front(std::vector<Choice> all, bool last) {
  auto fig = [last](const Choice& c) -> const OptionCost& { return last ? c.last : c.mid; };
  std::stable_sort(all.begin(), all.end(), [&](const Choice& a, const Choice& b) {
    const OptionCost &x = fig(a), &y = fig(b);
    if (x.cost != y.cost) return x.cost < y.cost;
    if (x.kept != y.kept) return x.kept < y.kept;
    return x.peak() < y.peak();
  });
  std::vector<Choice> out;
  for (const Choice& c : all) {
    bool beaten = false;
    for (const Choice& o : out)
      if (covers(fig(o), fig(c), last)) {
        beaten = true;
        break;
      }
    if (!beaten) out.push_back(c);
  }
  return out;
}

inline Keep named(const BlockGraph& g, Mask m) {
  std::vector<std::string> names;
  for (std::size_t t = 0; t < g.tensors().size(); ++t)
    if ((m >> t) & 1u) names.push_back(g.tensors()[t].name);
  return Keep::named(names);
}

// The schedule of one choice per block (each of its own block's table).
inline Schedule schedule_of(const BlockGraph& model, const std::vector<Choice>& pick) {
  Schedule s;
  s.blocks = static_cast<int>(pick.size());
  for (int b = 0; b < s.blocks; ++b) {
    const Choice& c = pick[static_cast<std::size_t>(b)];
    // Keeping the input alone is a checkpoint (kept as one, distributed with
    // --distribute-saved-activations).
    const bool input_only = c.keep == bit(model.of(b).input());
    s.forward(b, c.mode == Mode::Checkpoint || input_only ? Keep::input() : named(model.of(b), c.keep));
    if (c.offload) s.offload(b, named(model.of(b), c.offload));
  }
  for (int b = s.blocks - 1; b >= 0; --b) {
    const Choice& c = pick[static_cast<std::size_t>(b)];
    const BlockGraph& g = model.of(b);
    if (c.offload) s.prefetch(b, named(g, c.offload));
    if (c.mode == Mode::Checkpoint) s.recompute(b, named(g, c.keep));
    if (c.mode == Mode::Before) s.recompute(b, Keep::all());
    s.backward(b, c.inside ? named(g, c.inside) : Keep::all());
  }
  return s;
}

}  // namespace remat::optimal
