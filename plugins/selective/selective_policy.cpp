// `selective`: drop a chosen set of tensors of every block in the forward sweep and recompute
// them inside the backward sweep from what the block kept (Korthikanti et al. 2022).
//
//   forward b keep=(saved set minus the recompute set)   for b = 0..L-1
//   recompute b keep=all; backward b                     for b = L-1..0
//
// With `modules=` (Megatron-LM's names) the set is rebuilt as Megatron-LM rebuilds it: inside
// the block's backward, each module's tensors just before that module's own backward needs them
// (schedule version 2), so they live only while it runs:
//
//   backward b [the recompute set]                       for b = L-1..0
//
// The set is given by tensor (`recompute=`), by Megatron-LM's module names (`modules=`, as its
// --recompute-modules: core_attn, mlp, layernorm; BlockGraph::recompute_modules), or both (their
// union). Defaults (BlockGraph::default_selective()): with naive attention the attention core
// (attn.probs, attn.drop_mask, attn.drop_out; rebuilt from the saved Q|K|V), which leaves
// 34·s·b·h bytes per GPT-2 block with dropout; with flash attention llm.c's set (ln1.out,
// ln2.out and the activation-function output). See docs/policies.md.
#include <algorithm>
#include <string>
#include <vector>

#include "core/plugin/policy.h"
#include "core/util/error.h"

namespace {

class SelectivePolicy final : public remat::Policy {
 public:
  std::string name() const override { return "selective"; }
  std::string description() const override {
    return "drop chosen tensors of every block in forward, recompute them inside backward "
           "(default: the attention core with naive attention, norms and activation with flash)";
  }
  std::vector<remat::ParamDecl> params() const override {
    remat::ParamDecl d;
    d.name = "recompute";
    d.type = remat::ParamType::Names;
    d.help = "saved tensors to drop and recompute, '+'-separated (e.g. ln1.out+ln2.out); "
             "empty: the default set for the model's attention";
    remat::ParamDecl m;
    m.name = "modules";
    m.type = remat::ParamType::String;  // module names, not tensors: the plan checks them
    m.help = "Megatron-LM's recompute modules, '+'-separated: core_attn, mlp, layernorm "
             "(as --recompute-modules; rebuilt inside the backward, each before its own backward; "
             "with recompute=, their union)";
    return {d, m};
  }

  remat::Schedule plan(const remat::PlanContext& ctx) const override {
    const remat::BlockGraph& model = *ctx.graph;
    std::vector<std::string> asked =
        ctx.params.has("recompute") ? ctx.params.get_names("recompute") : std::vector<std::string>{};
    const std::vector<std::string> modules =
        ctx.params.has("modules") ? ctx.params.get_names("modules") : std::vector<std::string>{};
    // Each of the model's block tables (its layer kinds may differ in their steps) drops the
    // set by its own tensors; the schedule names the set once.
    std::vector<remat::Keep> keep, inside;  // per table: what its blocks keep, and rebuild inside
    std::vector<std::string> all_drops;
    // A module or tensor need be in one table only (a model's dense layers have no `moe`); a
    // table drops those it has.
    for (const std::string& mod : modules)
      if (!in_some_table(model, [&](const remat::BlockGraph& g) { return has_module(g, mod); }))
        model.module_tensors({mod});  // throws, naming what the blocks have
    for (const std::string& t : asked)
      if (!in_some_table(model, [&](const remat::BlockGraph& g) { return g.find(t).has_value(); }))
        drops(model, {t}, {});  // throws, naming what is recomputable
    for (int i = 0; i < model.table_count(); ++i) {
      const remat::BlockGraph& g = model.table(i);
      std::vector<std::string> mine, mods;
      for (const auto& t : asked)
        if (g.find(t)) mine.push_back(t);
      for (const auto& m : modules)
        if (has_module(g, m)) mods.push_back(m);
      const bool named = !asked.empty() || !modules.empty();
      const std::vector<std::string> drop = named && mine.empty() && mods.empty() ? std::vector<std::string>{}
                                                                               : drops(g, mine, mods);
      std::vector<std::string> kept;
      for (const auto& n : model.table(i).saved_names())
        if (std::find(drop.begin(), drop.end(), n) == drop.end()) kept.push_back(n);
      keep.push_back(remat::Keep::named(kept));
      inside.push_back(remat::Keep::named(drop));
      all_drops.insert(all_drops.end(), drop.begin(), drop.end());
    }
    std::sort(all_drops.begin(), all_drops.end());
    all_drops.erase(std::unique(all_drops.begin(), all_drops.end()), all_drops.end());

    remat::Schedule s;
    s.blocks = ctx.blocks;
    std::string list;
    for (const auto& n : all_drops) list += (list.empty() ? "" : "+") + n;
    std::string mods;
    for (const auto& n : modules) mods += (mods.empty() ? "" : "+") + n;
    s.params = (mods.empty() ? "" : "modules=" + mods + ",") + "recompute=" + list;
    for (int b = 0; b < ctx.blocks; ++b) s.forward(b, keep[static_cast<std::size_t>(model.table_index(b))]);
    for (int b = ctx.blocks - 1; b >= 0; --b) {
      if (!modules.empty()) {
        s.backward(b, inside[static_cast<std::size_t>(model.table_index(b))]);
        continue;
      }
      s.recompute(b, remat::Keep::all());
      s.backward(b);
    }
    return s;
  }

 private:
  static bool has_module(const remat::BlockGraph& g, const std::string& name) {
    for (const remat::RecomputeModule& r : g.recompute_modules())
      if (r.name == name) return true;
    return false;
  }
  template <class F>
  static bool in_some_table(const remat::BlockGraph& model, F&& has) {
    for (int i = 0; i < model.table_count(); ++i)
      if (has(model.table(i))) return true;
    return false;
  }

  // The saved tensors of table g to drop, sorted, each once: the named ones and the modules' (or
  // g's default set), each checked against g.
  static std::vector<std::string> drops(const remat::BlockGraph& g, std::vector<std::string> drop,
                                        const std::vector<std::string>& modules) {
    for (const std::string& t : g.module_tensors(modules)) drop.push_back(t);
    if (drop.empty()) drop = g.default_selective();
    const std::vector<std::string> saved = g.saved_names();
    auto known = [&] {
      std::string k;
      for (const auto& s : saved)
        if (s != g.tensors()[g.input()].name) k += (k.empty() ? "" : ", ") + s;
      return k;
    };
    for (const auto& n : drop) {
      auto id = g.find(n);
      if (!id) throw remat::Error("'" + n + "' is not a tensor of this model's blocks (recomputable: " + known() + ")");
      if (*id == g.input())
        throw remat::Error("'" + n + "' is the block input, which nothing inside the block can rebuild "
                           "(recompute from a checkpoint with the uniform policy instead)");
      if (!g.tensors()[*id].saved)
        throw remat::Error("'" + n + "' is not kept for backward in the first place (recomputable: " +
                           known() + ")");
    }
    std::sort(drop.begin(), drop.end());
    drop.erase(std::unique(drop.begin(), drop.end()), drop.end());
    return drop;
  }
};

}  // namespace

REMAT_DEFINE_POLICY_PLUGIN(SelectivePolicy)
