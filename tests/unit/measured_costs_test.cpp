// The budget planner's step costs from a measured run (core/analysis/measured_costs.h): summed
// per block and op, averaged over blocks, forward phase only, and the refusals.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/analysis/measured_costs.h"
#include "policy_test_util.h"

namespace remat {
namespace {

OpRecord rec(const std::string& op, int block, Phase phase, std::int64_t start, std::int64_t ns) {
  OpRecord o;
  o.op = op;
  o.name = "h" + std::to_string(block) + "." + op;
  o.block = block;
  o.phase = phase;
  o.start_ns = start;
  o.end_ns = start + ns;
  return o;
}

// A finished run of `m` whose forward of step i in block b took two records of
// 10·(i+1)·(b+1) and 5 ns, next to records that must not count.
Trace synthetic(const ModelConfig& m) {
  Trace t;
  t.model = m;
  BlockGraph g(m);
  std::int64_t now = 0;
  for (int b = 0; b < m.layers; ++b)
    for (std::size_t i = 0; i < g.steps().size(); ++i) {
      const std::string& op = g.steps()[i].name;
      t.ops.push_back(
          rec(op, b, Phase::Forward, now, 10 * static_cast<std::int64_t>(i + 1) * (b + 1)));
      t.ops.push_back(rec(op, b, Phase::Forward, now, 5));  // a second kernel of the same op
      t.ops.push_back(rec(op, b, Phase::Recompute, now, 1000000));
      t.ops.push_back(rec(op, b, Phase::Backward, now, 2000000));
      now += 100;
    }
  // Outside the blocks, even under a step's name.
  t.ops.push_back(rec(g.steps()[0].name, -1, Phase::Forward, now, 3000000));
  t.ops.push_back(rec("head", -1, Phase::Forward, now, 4000000));
  return t;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(MeasuredCosts, SumsKernelsPerBlockAndAveragesOverBlocksInTheForwardOnly) {
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  BlockGraph g(m);
  std::vector<double> c = measured_step_costs(synthetic(m), g);
  ASSERT_EQ(c.size(), g.steps().size());
  for (std::size_t i = 0; i < c.size(); ++i)  // ((10(i+1) + 5) + (20(i+1) + 5)) / 2
    EXPECT_DOUBLE_EQ(c[i], 15.0 * static_cast<double>(i + 1) + 5.0) << g.steps()[i].name;
}

TEST(MeasuredCosts, AStepWithoutRecordsCostsZeroOnlyWithoutFlops) {
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  BlockGraph g(m);
  Trace t = synthetic(m);
  std::vector<StepDef> steps = g.steps();
  const std::size_t k = 1;
  std::erase_if(t.ops, [&](const OpRecord& o) { return o.op == steps[k].name; });
  ASSERT_NE(steps[k].flops_fwd, 0u);
  EXPECT_NE(error_of([&] { step_costs_from_ops(t.ops, steps); }).find(steps[k].name),
            std::string::npos);
  steps[k].flops_fwd = 0;  // a step that runs no kernel
  std::vector<double> c = step_costs_from_ops(t.ops, steps);
  ASSERT_EQ(c.size(), steps.size());
  EXPECT_EQ(c[k], 0.0);
  EXPECT_DOUBLE_EQ(c[k + 1], 15.0 * static_cast<double>(k + 2) + 5.0);
}

TEST(MeasuredCosts, EveryMissingStepIsNamed) {
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  BlockGraph g(m);
  Trace t = synthetic(m);
  const std::string a = g.steps()[0].name, b = g.steps().back().name;
  std::erase_if(t.ops, [&](const OpRecord& o) {
    return (o.op == a && o.block >= 0) || (o.op == b && o.phase == Phase::Forward);
  });
  const std::string msg = error_of([&] { measured_step_costs(t, g); });
  EXPECT_NE(msg.find(a), std::string::npos) << msg;
  EXPECT_NE(msg.find(b), std::string::npos) << msg;
}

TEST(MeasuredCosts, RefusesAnotherModelNamingTheFieldAndBothValues) {
  const ModelConfig run = test::tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  struct Case {
    std::string field, in_run, in_plan;
    std::function<void(ModelConfig&)> change;
  };
  const std::vector<Case> cases = {
      {"architecture", "gpt2", "llama", [](ModelConfig& m) { set_family(m, Family::Llama); }},
      {"layers", "2", "3", [](ModelConfig& m) { m.layers = 3; }},
      {"hidden", "64", "128", [](ModelConfig& m) { m.hidden = 128; }},
      {"heads", "4", "8", [](ModelConfig& m) { m.heads = 8; }},
      {"kv_heads", "4", "2", [](ModelConfig& m) { m.kv_heads = 2; }},
      {"ffn", "256", "512", [](ModelConfig& m) { m.ffn = 512; }},
      {"vocab", "256", "512", [](ModelConfig& m) { m.vocab = 512; }},
      {"seq", "32", "16", [](ModelConfig& m) { m.seq = 16; }},
      {"batch", "2", "4", [](ModelConfig& m) { m.batch = 4; }},
      {"attention", "naive", "flash", [](ModelConfig& m) { m.attention = AttentionImpl::Flash; }},
      {"dtype", "bf16", "fp32", [](ModelConfig& m) { m.dtype = DType::F32; }},
      {"dropout", "0.1", "0", [](ModelConfig& m) { m.dropout = 0.0; }},
  };
  for (const auto& c : cases) {
    ModelConfig plan = run;
    c.change(plan);
    const std::string msg = error_of([&] { check_same_blocks(run, plan); });
    EXPECT_NE(msg.find(c.field + ": " + c.in_run + " in the run, " + c.in_plan + " in the plan"),
              std::string::npos)
        << msg;
  }
  // Through the costs: a run of 2 blocks does not plan 4.
  const ModelConfig four = test::tiny(Family::Gpt2, AttentionImpl::Naive, 4);
  const std::string msg = error_of([&] { measured_step_costs(synthetic(run), BlockGraph(four)); });
  EXPECT_NE(msg.find("layers: 2 in the run, 4 in the plan"), std::string::npos) << msg;
  // What changes neither the table nor the sizes is accepted.
  ModelConfig same = run;
  same.name = "renamed";
  same.dropout = 0.2;
  same.norm_eps = 1e-6;
  EXPECT_EQ(measured_step_costs(synthetic(run), BlockGraph(same)).size(),
            BlockGraph(run).steps().size());
}

TEST(MeasuredCosts, RefusesAnIncompleteRunAndOneWithoutOps) {
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  BlockGraph g(m);
  Trace t = synthetic(m);
  t.complete = false;
  t.status = "out_of_memory";
  EXPECT_NE(
      error_of([&] { measured_step_costs(t, g); }).find("did not complete (status out_of_memory"),
      std::string::npos);
  Trace none = synthetic(m);
  none.ops.clear();
  EXPECT_NE(error_of([&] { measured_step_costs(none, g); }).find("no op records"),
            std::string::npos);
}

TEST(MeasuredCosts, ARealCpuRunGivesEveryStepATime) {
  for (AttentionImpl attn : {AttentionImpl::Naive, AttentionImpl::Flash}) {
    const ModelConfig m = test::tiny(Family::Llama, attn, 2);
    Trace t = test::run(m, test::plan("none", m), 1, 0);
    BlockGraph g(m);
    std::vector<double> c = measured_step_costs(t, g);
    ASSERT_EQ(c.size(), g.steps().size());
    for (std::size_t i = 0; i < c.size(); ++i) EXPECT_GT(c[i], 0.0) << g.steps()[i].name;
  }
}

}  // namespace
}  // namespace remat
