// The budget policy's chain, derived from the block table: for every block and option the
// bytes it keeps, the peaks of its forward and of its recomputation + backward, and the cost
// of its recomputation. The byte figures follow the executor's own allocation order
// (core/engine/executor_block.cpp): what a forward or recompute action allocates step by step,
// what it frees after each step's last reader, the output it hands to the next block, the
// embedding's dropout mask held all step, and the head's final-norm output. The simulator's
// activation peak of the resulting schedule is the same number (tests check both ways).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/graph/block_graph.h"
#include "core/schedule/schedule.h"
#include "core/util/error.h"
#include "plugins/budget/budget_dp.h"

namespace remat::budget {

using Mask = std::uint64_t;
inline constexpr Mask bit(int i) { return Mask{1} << i; }

// A table's tensors as bits of a Mask: `policy` plans blocks of at most 64 tensors (Error).
inline void require_mask_width(const BlockGraph& g, const std::string& policy) {
  if (g.tensors().size() > 64)
    throw Error("the " + policy + " policy takes blocks of at most 64 tensors; this block table has " +
                std::to_string(g.tensors().size()));
}

// The saved set of table g.
inline Mask saved_mask(const BlockGraph& g) {
  Mask saved = 0;
  for (std::size_t t = 0; t < g.tensors().size(); ++t)
    if (g.tensors()[t].saved) saved |= bit(static_cast<int>(t));
  return saved;
}

struct Walk {
  std::uint64_t peak = 0;  // most bytes of this block alive during the action
  std::uint64_t end = 0;   // bytes the block holds afterwards (the output handed on excluded)
};

// Executor::forward on bytes: the block holds `live`; it runs the steps that make `keep`
// (and its output when `produce`), allocates their outputs (a temporary when the block
// already holds one), frees what the action no longer needs after each step, and ends
// holding `stays`.
inline Walk walk_forward(const BlockGraph& g, Mask live, Mask keep, bool recompute_only,
                         bool produce, bool checkpoint) {
  const auto& T = g.tensors();
  const auto& S = g.steps();
  const int in = g.input(), outp = g.output();
  const Mask saved = saved_mask(g);
  Mask targets = (recompute_only ? (keep & ~bit(in)) : keep) | (produce ? bit(outp) : 0);
  std::vector<bool> lv(T.size()), tg(T.size());
  for (std::size_t t = 0; t < T.size(); ++t) {
    lv[t] = (live >> t) & 1u;
    tg[t] = (targets >> t) & 1u;
  }
  std::vector<int> run;
  if (!g.recompute_flops(lv, tg, &run)) return {~std::uint64_t{0}, ~std::uint64_t{0}};
  Mask stays = recompute_only ? (live | targets) : (keep & saved);
  if (!recompute_only && checkpoint) stays |= bit(in);
  std::vector<int> last_use(T.size(), -1);
  for (int s : run)
    for (int t : S[s].in) last_use[static_cast<std::size_t>(t)] = s;

  std::uint64_t now = 0;
  for (std::size_t t = 0; t < T.size(); ++t)
    if ((live >> t) & 1u) now += T[t].bytes;
  Walk w{now, 0};
  Mask held = live, temp = 0;
  for (int s : run) {
    for (int t : S[s].out) {
      now += T[t].bytes;
      if ((held >> t) & 1u) temp |= bit(t);
      else held |= bit(t);
    }
    w.peak = std::max(w.peak, now);
    auto done = [&](int t) {
      if (t == outp || ((stays >> t) & 1u)) return;
      if ((temp >> t) & 1u) {
        temp &= ~bit(t);
        now -= T[t].bytes;
      } else if ((held >> t) & 1u) {
        held &= ~bit(t);
        now -= T[t].bytes;
      }
    };
    for (int t : S[s].in)
      if (last_use[static_cast<std::size_t>(t)] == s) done(t);
    for (int t : S[s].out)
      if (last_use[static_cast<std::size_t>(t)] < s) done(t);
  }
  for (std::size_t t = 0; t < T.size(); ++t)
    if ((temp >> t) & 1u) now -= T[t].bytes;
  held &= ~bit(outp);
  w.end = 0;
  for (std::size_t t = 0; t < T.size(); ++t)
    if ((held >> t) & 1u) w.end += T[t].bytes;
  return w;
}

struct ChainSpec {
  Chain chain;
  std::vector<std::string> selective;  // the tensors the selective option drops
  // Per block table of the model (BlockGraph::table), what each option keeps after the forward.
  std::vector<std::array<Mask, kOptions>> keep;
};

inline std::uint64_t mask_bytes(const BlockGraph& g, Mask m) {
  std::uint64_t b = 0;
  for (std::size_t t = 0; t < g.tensors().size(); ++t)
    if ((m >> t) & 1u) b += g.tensors()[t].bytes;
  return b;
}

// The cost of one forward of each step of table `table` of `model` in a block with the model's
// window or without: its FLOPs there when `flops` (the costs are FLOPs, which differ between
// the two), else the given costs (PlanContext::step_cost, the first table's; the other tables
// take theirs by step name, FLOPs where a name is missing).
inline std::vector<double> step_costs(const BlockGraph& model, int table, bool windowed,
                                      const std::vector<double>& step_cost, bool flops) {
  const BlockGraph& g = model.table(table);
  std::vector<double> out;
  for (std::size_t s = 0; s < g.steps().size(); ++s) {
    const StepDef& sd = g.steps()[s];
    double c = static_cast<double>(sd.fwd_flops(windowed));
    if (!flops) {
      if (table == 0 && s < step_cost.size()) c = step_cost[s];
      for (std::size_t k = 0; table != 0 && k < model.steps().size() && k < step_cost.size(); ++k)
        if (model.steps()[k].name == sd.name) {
          c = step_cost[k];
          break;
        }
    }
    out.push_back(c);
  }
  return out;
}

// One table's options: what each keeps, and a middle block's and the last block's costs.
// cost: the cost of one forward of each of its steps (step_costs).
struct TableOptions {
  std::array<Mask, kOptions> keep{};
  ChainBlock mid, last;
};

inline TableOptions table_options(const BlockGraph& model, int table, const std::vector<double>& cost,
                                  const std::vector<std::string>& selective) {
  const BlockGraph& g = model.table(table);
  const ModelConfig& m = g.config();
  const auto& T = g.tensors();
  const int in = g.input();
  auto cost_of = [&](int s) { return cost[static_cast<std::size_t>(s)]; };
  const Mask saved = saved_mask(g);
  Mask drop = 0;
  for (const auto& n : selective)
    if (auto id = g.find(n); id && *id != in) drop |= bit(*id);
  drop &= saved;
  TableOptions out;
  out.keep[Store] = saved;
  out.keep[Selective] = saved & ~drop;
  out.keep[Checkpoint] = bit(in);

  // The head holds the final norm's output next to the last block's output.
  const std::uint64_t act = m.act_size();
  const OuterSizes outer(m);
  const std::uint64_t final_in = static_cast<std::uint64_t>(outer.final_in) * act;
  const std::uint64_t lnf = static_cast<std::uint64_t>(outer.lnf_out) * act;
  const std::uint64_t saved_bytes = mask_bytes(g, saved);
  for (int o = 0; o < kOptions; ++o) {
    const Mask keep = out.keep[static_cast<std::size_t>(o)];
    Walk f = walk_forward(g, bit(in), o == Store ? saved : keep, false, true, o == Checkpoint);
    OptionCost oc;
    oc.kept = f.end;
    oc.fwd_peak = f.peak;
    std::uint64_t rec_peak = saved_bytes;
    if (o != Store) {
      Walk r = walk_forward(g, keep, saved, true, false, false);
      rec_peak = r.peak;
      std::vector<bool> lv(T.size()), tg(T.size());
      for (std::size_t t = 0; t < T.size(); ++t) {
        lv[t] = (keep >> t) & 1u;
        tg[t] = ((saved & ~bit(in)) >> t) & 1u;
      }
      std::vector<int> steps;
      g.recompute_flops(lv, tg, &steps);
      for (int s : steps) oc.cost += cost_of(s);
    }
    oc.allowed = o != Selective || (drop != 0);
    oc.bwd_peak = rec_peak;
    out.mid.opt[static_cast<std::size_t>(o)] = oc;
    // The last block recomputes next to its output; the head adds the final norm's output
    // to the whole saved set.
    OptionCost lo = oc;
    lo.bwd_peak = final_in + std::max(rec_peak, saved_bytes + lnf);
    out.last.opt[static_cast<std::size_t>(o)] = lo;
  }
  return out;
}

// The chain of model g without its blocks: what lies outside them. The embedding's dropout
// mask lives all step (base); the embedding briefly holds its sum next to block 0's input
// (floor).
inline Chain outer_chain(const BlockGraph& g) {
  const ModelConfig& m = g.config();
  const std::uint64_t act = m.act_size();
  const OuterSizes outer(m);
  const std::uint64_t mask = static_cast<std::uint64_t>(outer.embed_mask);
  const std::uint64_t in_bytes = g.tensors()[static_cast<std::size_t>(g.input())].bytes;
  Chain c;
  c.base = mask;
  c.floor = in_bytes + mask + (m.has_dropout() ? static_cast<std::uint64_t>(outer.embed_out) * act : 0);
  return c;
}

// The chain of a model's `blocks` blocks, each with its own table's options, its steps costed
// by step_costs (FLOPs by the block's window when `flops`; the windowed options only where a
// block has the window).
inline ChainSpec chain_from_graph(const BlockGraph& g, const std::vector<double>& step_cost,
                                  int blocks, std::vector<std::string> selective, bool flops = false) {
  ChainSpec spec;
  std::vector<std::optional<TableOptions>> by_class(2 * static_cast<std::size_t>(g.table_count()));
  auto options = [&](int table, bool windowed) -> const TableOptions& {
    auto& o = by_class[static_cast<std::size_t>(2 * table + (windowed ? 1 : 0))];
    if (!o) o = table_options(g, table, step_costs(g, table, windowed, step_cost, flops), selective);
    return *o;
  };
  for (int i = 0; i < g.table_count(); ++i) spec.keep.push_back(options(i, false).keep);
  spec.chain = outer_chain(g);
  for (int b = 0; b < blocks; ++b) {
    const TableOptions& t = options(g.table_index(b), g.windowed(b));
    spec.chain.blocks.push_back(b + 1 == blocks ? t.last : t.mid);
  }
  spec.selective = std::move(selective);
  return spec;
}

// The schedule of a choice: the first sweep keeps what each option keeps; before its
// backward a block that dropped something recomputes it.
inline Schedule schedule_for(const BlockGraph& g, const ChainSpec& spec, const std::vector<int>& choice) {
  Schedule s;
  s.blocks = static_cast<int>(choice.size());
  std::vector<Keep> sel;  // per table
  for (int i = 0; i < g.table_count(); ++i) {
    std::vector<std::string> names;
    const BlockGraph& t = g.table(i);
    for (std::size_t k = 0; k < t.tensors().size(); ++k)
      if ((spec.keep[static_cast<std::size_t>(i)][Selective] >> k) & 1u) names.push_back(t.tensors()[k].name);
    sel.push_back(Keep::named(names));
  }
  for (int b = 0; b < s.blocks; ++b) {
    switch (choice[static_cast<std::size_t>(b)]) {
      case Store: s.forward(b, Keep::all()); break;
      case Selective: s.forward(b, sel[static_cast<std::size_t>(g.table_index(b))]); break;
      default: s.forward(b, Keep::input()); break;
    }
  }
  for (int b = s.blocks - 1; b >= 0; --b) {
    if (choice[static_cast<std::size_t>(b)] != Store) s.recompute(b, Keep::all());
    s.backward(b);
  }
  return s;
}

}  // namespace remat::budget
