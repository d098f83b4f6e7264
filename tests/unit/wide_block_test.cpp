// A block table with more tensors than a machine word has bits (a chain of 70 GELUs and a
// residual): the validator, the simulator and the CPU executor have no fixed limit on a block's
// tensors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/executor.h"
#include "core/engine/model_state.h"
#include "core/engine/simulator.h"
#include "core/graph/block_graph.h"
#include "core/schedule/validator.h"
#include "core/util/error.h"

namespace remat {
namespace {

constexpr int kChain = 70;

ModelConfig wide_model() {
  ModelConfig m;
  m.name = "wide";
  m.layers = 3;
  m.hidden = 16;
  m.heads = 2;
  m.kv_heads = 2;
  m.ffn = 64;
  m.seq = 4;
  m.positions = 4;
  m.batch = 2;
  m.vocab = 16;
  m.dropout = 0.0;
  m.dtype = DType::F32;
  return m;
}

std::string gelu_out(int i) { return "gelu" + std::to_string(i) + ".out"; }

// block.in → gelu0 → … → gelu69 → residual with block.in → block.out: 72 tensors; every GELU
// input is saved (71 tensors), the last GELU's output is read only by the residual.
BlockGraph wide_block(const ModelConfig& m) {
  const std::int64_t n = m.tokens() * m.hidden;
  std::vector<TensorDef> tensors;
  std::vector<StepDef> steps;
  auto tensor = [&](const std::string& name) {
    TensorDef t;
    t.name = name;
    t.dtype = m.dtype;
    t.numel = n;
    t.formula = "4·s·b·h";
    tensors.push_back(t);
    return static_cast<int>(tensors.size()) - 1;
  };
  const int in = tensor("block.in");
  int x = in;
  for (int i = 0; i < kChain; ++i) {
    const int y = tensor(gelu_out(i));
    StepDef s{"gelu" + std::to_string(i), OpKind::Gelu, StepKind::Activation, {x}, {y}, {x}};
    s.M = n;
    s.flops_fwd = 8ull * n;
    s.flops_bwd = 16ull * n;
    steps.push_back(s);
    x = y;
  }
  const int out = tensor("block.out");
  StepDef r{"residual", OpKind::Residual, StepKind::Elementwise, {in, x}, {out}, {}};
  r.site = kSiteMlpResidual;
  r.M = n;
  r.flops_fwd = 2ull * n;
  r.flops_bwd = 2ull * n;
  steps.push_back(r);
  return BlockGraph::from_table(m, tensors, steps, in, out);
}

// Forward every block keeping `keep`, then for each block from the last: recompute it whole
// (when asked) and reverse it.
Schedule keep_then_reverse(int layers, const Keep& keep, bool recompute) {
  Schedule s;
  s.blocks = layers;
  for (int b = 0; b < layers; ++b) s.forward(b, keep);
  for (int b = layers - 1; b >= 0; --b) {
    if (recompute) s.recompute(b, Keep::all());
    s.backward(b);
  }
  return s;
}

// The saved set without its last tensor, which lies past the 64th.
std::vector<std::string> all_but_last_saved(const BlockGraph& g) {
  std::vector<std::string> names = g.saved_names();
  names.pop_back();
  return names;
}

TEST(WideBlock, TheTableHasMoreThanSixtyFourSavedTensors) {
  BlockGraph g = wide_block(wide_model());
  EXPECT_EQ(g.tensors().size(), static_cast<std::size_t>(kChain + 2));
  EXPECT_GT(g.saved_names().size(), 64u);
  EXPECT_EQ(g.saved_names().back(), gelu_out(kChain - 2));
  EXPECT_GT(*g.find(gelu_out(kChain - 2)), 64);
}

TEST(WideBlock, ValidatesAndSimulatesWithEveryTensorAccountedFor) {
  const ModelConfig m = wide_model();
  BlockGraph g = wide_block(m);
  const std::uint64_t in_bytes = g.tensors()[static_cast<std::size_t>(g.input())].bytes;
  struct Case {
    std::string name;
    Schedule s;
    std::uint64_t saved;  // device bytes per block after the forward sweep
  };
  const std::vector<std::string> drop_last = {gelu_out(kChain - 2)};
  std::vector<Case> cases = {
      {"store-all", store_all_schedule(m.layers), g.saved_bytes()},
      {"checkpoint", keep_then_reverse(m.layers, Keep::input(), true), in_bytes},
      {"all but the last saved", keep_then_reverse(m.layers, Keep::named(all_but_last_saved(g)), true),
       g.saved_bytes_without(drop_last)},
  };
  for (const Case& c : cases) {
    ScheduleStats plan = validate_schedule(c.s, g);
    Prediction p = simulate(g, c.s, nullptr);
    EXPECT_EQ(p.block_forwards, plan.block_forwards) << c.name;
    EXPECT_EQ(p.flops.recompute, plan.flops_recompute) << c.name;
    ASSERT_EQ(p.saved_bytes_per_block.size(), static_cast<std::size_t>(m.layers)) << c.name;
    for (int b = 0; b < m.layers; ++b) EXPECT_EQ(p.saved_bytes_per_block[b], c.saved) << c.name;
  }
  // Recomputing what a checkpoint dropped runs the chain up to the last saved tensor again.
  std::uint64_t chain = 0;
  for (int i = 0; i < kChain - 1; ++i) chain += g.steps()[static_cast<std::size_t>(i)].flops_fwd;
  EXPECT_EQ(validate_schedule(cases[1].s, g).flops_recompute, m.layers * chain);
  // Dropping only the last saved tensor recomputes only the one step that makes it.
  EXPECT_EQ(validate_schedule(cases[2].s, g).flops_recompute,
            m.layers * g.steps()[static_cast<std::size_t>(kChain - 2)].flops_fwd);
}

TEST(WideBlock, NamesAMissingTensorPastTheSixtyFourth) {
  const ModelConfig m = wide_model();
  BlockGraph g = wide_block(m);
  Schedule s = keep_then_reverse(m.layers, Keep::named(all_but_last_saved(g)), false);
  try {
    validate_schedule(s, g);
    FAIL() << "accepted";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.index(), static_cast<std::size_t>(m.layers));
    EXPECT_NE(std::string(e.what()).find("'" + gelu_out(kChain - 2) + "'"), std::string::npos)
        << e.what();
  }
  // A name the table does not have is refused with the saved names listed, the last included.
  s = keep_then_reverse(m.layers, Keep::named({"gelu70.out"}), true);
  try {
    validate_schedule(s, g);
    FAIL() << "accepted";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.index(), 0u);
    EXPECT_NE(std::string(e.what()).find(gelu_out(kChain - 2) + ")"), std::string::npos) << e.what();
  }
}

struct CpuStep {
  double loss = 0;
  std::uint64_t grads = 0, peak = 0, predicted_peak = 0;
};

CpuStep run_on_cpu(const BlockGraph& g, const Schedule& s) {
  const ModelConfig& m = g.config();
  CpuBackend be(1);
  LogicalClock clock;
  TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
  ModelState state(m, be, alloc);
  state.init_weights(5);
  ExecOptions o;
  o.seed = 5;
  Executor ex(state, be, alloc, nullptr, o, g);
  std::vector<std::int32_t> tok(static_cast<std::size_t>(m.tokens())), tgt(tok);
  for (std::size_t i = 0; i < tok.size(); ++i) {
    tok[i] = static_cast<std::int32_t>(i % static_cast<std::size_t>(m.vocab));
    tgt[i] = static_cast<std::int32_t>((7 * i + 3) % static_cast<std::size_t>(m.vocab));
  }
  CpuStep r;
  r.loss = ex.run_step(s, 0, tok, tgt).loss;
  r.grads = state.grad_checksum();
  r.peak = alloc.peak_device();
  r.predicted_peak = simulate(g, s, &be).peak_bytes;
  return r;
}

TEST(WideBlock, RunsOnTheCpuAsSimulatedAndRecomputesTheSameGradients) {
  const ModelConfig m = wide_model();
  BlockGraph g = wide_block(m);
  const CpuStep all = run_on_cpu(g, store_all_schedule(m.layers));
  const CpuStep ckpt = run_on_cpu(g, keep_then_reverse(m.layers, Keep::input(), true));
  const CpuStep part = run_on_cpu(g, keep_then_reverse(m.layers, Keep::named(all_but_last_saved(g)), true));
  for (const CpuStep* r : {&all, &ckpt, &part}) {
    EXPECT_EQ(r->peak, r->predicted_peak);
    EXPECT_EQ(r->loss, all.loss);
    EXPECT_EQ(r->grads, all.grads);
  }
  EXPECT_GT(all.loss, 0.0);
  EXPECT_LT(ckpt.peak, all.peak);
}

}  // namespace
}  // namespace remat
