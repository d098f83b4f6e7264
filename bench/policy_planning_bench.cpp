// Planning time of the policies (planning only: no printing, no simulation unless named).
//   revolve: L = 100,000 blocks, 20 snapshots (the pure planner and the plugin's plan()).
//   budget:  L = 1,000 blocks (the dynamic program alone, the plugin's plan() without the
//            simulator check, and with it).
// Usage: policy_planning_bench [--benchmark_filter=...]; the plugins are loaded from the
// plugin directory next to the binary.
#include <benchmark/benchmark.h>

#include <stdexcept>

#include "core/engine/simulator.h"
#include "core/plugin/registry.h"
#include "plugins/budget/budget_chain.h"
#include "plugins/budget/budget_dp.h"
#include "plugins/revolve/revolve.h"

using namespace remat;

namespace {

ModelConfig gpt2_small_blocks(int layers) {
  ModelConfig m;
  m.name = "bench";
  m.layers = layers;
  m.hidden = 768;
  m.heads = 12;
  m.kv_heads = 12;
  m.ffn = 3072;
  m.seq = 1024;
  m.positions = 1024;
  m.batch = 8;
  m.vocab = 50304;
  m.dropout = 0.1;
  return m;
}

PolicyRegistry& registry() {
  static PolicyRegistry* r = [] {
    auto* x = new PolicyRegistry();
    x->load_dirs(PolicyRegistry::default_dirs());
    return x;
  }();
  return *r;
}

PlanContext context(const LoadedPolicy& p, const ModelConfig& m, const BlockGraph& g,
                    const std::map<std::string, std::string>& params) {
  PlanContext ctx;
  ctx.model = &m;
  ctx.graph = &g;
  ctx.blocks = m.layers;
  ctx.params = registry().check_params(p, params, &g);
  for (const auto& s : g.steps()) ctx.step_cost.push_back(static_cast<double>(s.flops_fwd));
  return ctx;
}

const LoadedPolicy& loaded(const std::string& name) {
  const LoadedPolicy* p = registry().find(name);
  if (!p) throw std::runtime_error("plugin '" + name + "' not found next to the benchmark");
  return *p;
}

void BM_RevolvePlanner(benchmark::State& st) {
  const int L = static_cast<int>(st.range(0)), s = static_cast<int>(st.range(1));
  std::size_t actions = 0;
  for (auto _ : st) {
    Schedule out;
    out.blocks = L;
    revolve::plan(L, s, out);
    actions = out.actions.size();
    benchmark::DoNotOptimize(out.actions.data());
  }
  st.counters["actions"] = static_cast<double>(actions);
  st.counters["block_forwards"] =
      static_cast<double>(L) + static_cast<double>(revolve::min_advances(L, s));
}
BENCHMARK(BM_RevolvePlanner)->Args({100000, 20})->Unit(benchmark::kMillisecond);

void BM_RevolvePlugin(benchmark::State& st) {
  const int L = static_cast<int>(st.range(0));
  ModelConfig m = gpt2_small_blocks(L);
  BlockGraph g(m);
  // plan() itself, in this process: without the registry's child process and JSON round trip.
  const auto p = create_policy_in_process(loaded("revolve"));
  PlanContext ctx = context(loaded("revolve"), m, g, {{"snapshots", std::to_string(st.range(1))}});
  for (auto _ : st) {
    Schedule s = p->plan(ctx);
    benchmark::DoNotOptimize(s.actions.data());
  }
}
BENCHMARK(BM_RevolvePlugin)->Args({100000, 20})->Unit(benchmark::kMillisecond);

budget::ChainSpec chain(const BlockGraph& g, int L) {
  std::vector<double> cost;
  for (const auto& s : g.steps()) cost.push_back(static_cast<double>(s.flops_fwd));
  return budget::chain_from_graph(g, cost, L, g.default_selective());
}

// A budget halfway between the smallest feasible one and storing everything.
std::uint64_t middle_budget(const budget::Chain& c) {
  std::vector<int> store(c.blocks.size(), budget::Store);
  return (budget::min_budget(c) + budget::chain_peak(c, store)) / 2;
}

void BM_BudgetDynamicProgram(benchmark::State& st) {
  const int L = static_cast<int>(st.range(0));
  ModelConfig m = gpt2_small_blocks(L);
  BlockGraph g(m);
  budget::ChainSpec spec = chain(g, L);
  const std::uint64_t b = middle_budget(spec.chain);
  for (auto _ : st) {
    budget::Solution s = budget::solve(spec.chain, b);
    benchmark::DoNotOptimize(s.cost);
  }
}
BENCHMARK(BM_BudgetDynamicProgram)->Arg(1000)->Unit(benchmark::kMillisecond);

void BM_BudgetSmallestBudget(benchmark::State& st) {
  const int L = static_cast<int>(st.range(0));
  ModelConfig m = gpt2_small_blocks(L);
  BlockGraph g(m);
  budget::ChainSpec spec = chain(g, L);
  for (auto _ : st) benchmark::DoNotOptimize(budget::min_budget(spec.chain));
}
BENCHMARK(BM_BudgetSmallestBudget)->Arg(1000)->Unit(benchmark::kMillisecond);

void BM_BudgetPlugin(benchmark::State& st) {
  const int L = static_cast<int>(st.range(0));
  const bool check = st.range(1) != 0;
  ModelConfig m = gpt2_small_blocks(L);
  BlockGraph g(m);
  const auto p = create_policy_in_process(loaded("budget"));
  PlanContext ctx = context(loaded("budget"), m, g, {});
  ctx.memory_budget = middle_budget(chain(g, L).chain);
  if (check)
    ctx.activation_peak = [&m](const Schedule& s) { return simulate(m, s, nullptr).activation_peak_bytes; };
  for (auto _ : st) {
    Schedule s = p->plan(ctx);
    benchmark::DoNotOptimize(s.actions.data());
  }
  st.SetLabel(check ? "with the simulator check" : "planning only");
}
BENCHMARK(BM_BudgetPlugin)->Args({1000, 0})->Args({1000, 1})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
