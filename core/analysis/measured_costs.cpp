#include "core/analysis/measured_costs.h"
#include "core/trace/schema.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <map>
#include <sstream>

#include "core/trace/run_dir.h"
#include "core/util/error.h"

namespace remat {

namespace {

template <typename T>
std::string text(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

void check_same_blocks(const ModelConfig& run, const ModelConfig& plan) {
  auto differs = [](const std::string& field, const std::string& r, const std::string& p) {
    throw Error("the run's model differs from the planned model in " + field + ": " + r +
                " in the run, " + p + " in the plan");
  };
  auto same = [&](const char* field, auto r, auto p) {
    if (r != p) differs(field, text(r), text(p));
  };
  if (run.family != plan.family) differs("architecture", to_string(run.family), to_string(plan.family));
  same("layers", run.layers, plan.layers);
  same("hidden", run.hidden, plan.hidden);
  same("heads", run.heads, plan.heads);
  same("kv_heads", run.kv_heads, plan.kv_heads);
  same("ffn", run.ffn, plan.ffn);
  same("vocab", run.vocab, plan.vocab);
  same("seq", run.seq, plan.seq);
  same("batch", run.batch, plan.batch);
  same("head_dim", run.head_dim(), plan.head_dim());
  // The block's features (norms, biases, MLP, ...): whatever else of the model JSON differs.
  auto features = [](const ModelConfig& m) {
    nlohmann::json j = model_to_json(m);
    for (const char* k : {"name", "seq", "batch", "dropout", "norm_eps", "rope_theta", "positions",
                          "attention", "dtype"})
      j.erase(k);
    return j.dump();
  };
  if (features(run) != features(plan)) differs("block features", features(run), features(plan));
  if (run.attention != plan.attention)
    differs("attention", to_string(run.attention), to_string(plan.attention));
  if (run.dtype != plan.dtype) differs("dtype", to_string(run.dtype), to_string(plan.dtype));
  // The rate changes neither the table nor a step's size; dropout on or off changes both.
  if (run.has_dropout() != plan.has_dropout())
    differs("dropout", text(run.dropout), text(plan.dropout));
}

std::vector<double> step_costs_from_ops(const std::vector<OpRecord>& ops,
                                        const std::vector<StepDef>& steps,
                                        const std::vector<bool>& unrun) {
  // Summed ns per (step name, block).
  std::map<std::string, std::map<int, double>> per_block;
  for (const auto& s : steps) per_block[s.name];
  for (const auto& o : ops) {
    if (o.phase != Phase::Forward || o.block < 0) continue;
    auto it = per_block.find(o.op);
    if (it == per_block.end()) continue;
    it->second[o.block] += static_cast<double>(o.end_ns - o.start_ns);
  }
  std::vector<double> cost;
  std::string missing;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const StepDef& s = steps[i];
    const auto& blocks = per_block[s.name];
    if (blocks.empty()) {
      if (s.flops_fwd != 0 && !(i < unrun.size() && unrun[i])) missing += (missing.empty() ? "" : ", ") + s.name;
      cost.push_back(0.0);
      continue;
    }
    double sum = 0.0;
    for (const auto& [b, ns] : blocks) sum += ns;
    cost.push_back(sum / static_cast<double>(blocks.size()));
  }
  if (!missing.empty())
    throw Error("the run has no forward records of the block step" +
                std::string(missing.find(',') == std::string::npos ? " " : "s ") + missing);
  return cost;
}

std::vector<double> measured_step_costs(const Trace& t, const BlockGraph& g) {
  if (!t.complete)
    throw Error("the run did not complete (status " + t.status +
                (t.error.empty() ? "" : ": " + t.error) + ")");
  if (t.ops.empty()) throw Error("the run has no op records (was it run with --no-profile?)");
  check_same_blocks(t.model, g.config());
  // The first table's steps that no block of the model runs (all its layers without RoPE) have
  // no records; their cost is never used.
  std::vector<bool> used(static_cast<std::size_t>(g.table_count()), false);
  for (int b = 0; b < g.config().layers; ++b) used[static_cast<std::size_t>(g.table_index(b))] = true;
  std::vector<bool> unrun(g.steps().size(), !used[0]);
  for (int i = 1; i < g.table_count(); ++i) {
    if (!used[static_cast<std::size_t>(i)]) continue;
    // The costs are the first table's steps (PlanContext::step_cost); a table with steps of its own
    // (dense MLPs among experts) would take FLOPs for those next to nanoseconds: refused.
    for (const StepDef& v : g.table(i).steps())
      if (std::none_of(g.steps().begin(), g.steps().end(), [&](const StepDef& s) { return s.name == v.name; }))
        throw Error("measured costs of a model whose layers differ in their steps beyond RoPE (block table " +
                    std::to_string(i) + " has '" + v.name + "', the first has not) are not supported yet; "
                    "plan with FLOP costs");
    for (const StepDef& v : g.table(i).steps())
      for (std::size_t s = 0; s < unrun.size(); ++s)
        if (v.name == g.steps()[s].name) unrun[s] = false;
  }
  return step_costs_from_ops(t.ops, g.steps(), unrun);
}

StepCosts step_costs_from_run_dir(const std::string& dir, const ModelConfig& m) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(fs::path(dir) / schema::kSweepFile, ec))
    throw Error("a sweep directory, not a run directory; name one of its runs, e.g. " +
                (fs::path(dir) / "none").string());
  const Trace t = read_run_dir(dir);
  StepCosts c;
  c.cost = measured_step_costs(t, BlockGraph(m));
  c.unit = "ns measured on " + t.device + " in " + dir;
  return c;
}

void add_costs_provenance(Trace& t, const std::optional<StepCosts>& costs) {
  if (costs) t.provenance.emplace_back(kPlannerCostsKey, costs->unit);
}

}  // namespace remat
