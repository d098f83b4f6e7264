// Megatron-LM's recompute options as policies: selective by module (`selective:modules=`, its
// --recompute-modules), full recomputation by `uniform:layers=N` and `block:layers=N` (its
// --recompute-method uniform | block with --recompute-num-layers N). What each drops, measured
// from a real run's allocator events, and the run bitwise equal to `none`.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/graph/block_graph.h"
#include "core/schedule/schedule.h"
#include "policy_test_util.h"
#include "test_files.h"

namespace remat {
namespace {

using test::plan;
using test::run;
using test::tiny;
using Names = std::vector<std::string>;

Names module(const BlockGraph& g, const std::string& name) {
  for (const RecomputeModule& r : g.recompute_modules())
    if (r.name == name) return r.tensors;
  return {};
}

// What planning `policy` for `m` throws (testing::message_of).
std::string message_of(const std::string& policy, const ModelConfig& m) {
  return testing::message_of([&] { plan(policy, m); });
}

TEST(RecomputeModules, Gpt2NaiveHasTheAttentionCoreTheMlpAndTheNorms) {
  const BlockGraph g(tiny(Family::Gpt2, AttentionImpl::Naive));
  ASSERT_EQ(g.recompute_modules().size(), 3u);
  // The core's output (attn.ctx) is read by the output projection's backward: kept.
  EXPECT_EQ(module(g, "core_attn"), (Names{"attn.probs", "attn.drop_mask", "attn.drop_out"}));
  // The MLP's input (ln2.out) and output are outside it; its inner tensors go.
  EXPECT_EQ(module(g, "mlp"), (Names{"mlp.gelu_in", "mlp.gelu_out"}));
  EXPECT_EQ(module(g, "layernorm"), (Names{"ln1.out", "ln2.out"}));
  // The Korthikanti set is core_attn.
  EXPECT_EQ(module(g, "core_attn"), g.default_selective());
}

TEST(RecomputeModules, FlashAndGatedBlocks) {
  const BlockGraph g(tiny(Family::Llama, AttentionImpl::Flash));
  EXPECT_EQ(module(g, "core_attn"), (Names{"attn.lse"}));
  EXPECT_EQ(module(g, "mlp"), (Names{"mlp.gate_up", "mlp.act"}));
  EXPECT_EQ(g.module_tensors({"mlp", "core_attn"}), (Names{"attn.lse", "mlp.gate_up", "mlp.act"}));
}

TEST(RecomputeModules, NamesABlockLacksAreRefusedWithWhatItHas) {
  const BlockGraph g(tiny(Family::Gpt2, AttentionImpl::Naive));
  for (const char* n : {"moe", "moe_act", "shared_experts", "mla_up_proj", "attention", "ln1.out"}) {
    try {
      g.module_tensors({n});
      ADD_FAILURE() << n << " was taken";
    } catch (const Error& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find(std::string("'") + n + "'"), std::string::npos) << w;
      EXPECT_NE(w.find("its blocks have: core_attn, mlp, layernorm"), std::string::npos) << w;
    }
  }
}

TEST(PolicySelectiveModules, EachSetRunsBitwiseAndSavesWhatItSays) {
  const ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  const BlockGraph g(m);
  const Trace base = run(m, plan("none", m), 1, 0);
  for (const Names& mods : {Names{"core_attn"}, Names{"core_attn", "mlp"}, Names{"core_attn", "mlp", "layernorm"},
                            Names{"layernorm"}}) {
    std::string p = "selective:modules=";
    for (std::size_t i = 0; i < mods.size(); ++i) p += (i ? "+" : "") + mods[i];
    SCOPED_TRACE(p);
    const Schedule s = plan(p, m);
    EXPECT_EQ(s.params.rfind("modules=" + p.substr(p.find('=') + 1) + ",recompute=", 0), 0u) << s.params;
    const Trace t = run(m, s, 1, 0);
    EXPECT_EQ(t.losses(), base.losses());
    EXPECT_EQ(t.grad_checksum, base.grad_checksum);
    EXPECT_EQ(t.peak_bytes, t.predicted_peak_bytes);
    for (std::uint64_t b : t.saved_bytes_per_block) EXPECT_EQ(b, g.saved_bytes_without(g.module_tensors(mods)));
  }
  const std::string w = message_of("selective:modules=core_attn+moe", m);
  EXPECT_NE(w.find("'moe' is a module this model's blocks do not have (its blocks have: core_attn, mlp, layernorm)"),
            std::string::npos) << w;
}

TEST(PolicyUniformLayers, EveryChunkIsRecomputedTheLastToo) {
  const ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 5);
  const BlockGraph g(m);
  const std::uint64_t in = g.tensors()[g.input()].bytes;
  const Trace base = run(m, plan("none", m), 1, 0);
  struct Case {
    const char* policy;
    std::vector<std::uint64_t> saved;
    std::uint64_t forwards;
  };
  const Case cases[] = {
      // Chunks [0, 2), [2, 4), [4]: each recomputed (its last block by `recompute`).
      {"uniform:layers=2", {in, 0, in, 0, in}, 5 + 5},
      {"uniform:layers=1", {in, in, in, in, in}, 5 + 5},
      {"uniform:layers=5", {in, 0, 0, 0, 0}, 5 + 5},
      // Block method: the first N blocks each from its input, the rest kept.
      {"block:layers=2", {in, in, g.saved_bytes(), g.saved_bytes(), g.saved_bytes()}, 5 + 2},
      {"block", {in, in, in, in, in}, 5 + 5},
      {"block:layers=0", {g.saved_bytes(), g.saved_bytes(), g.saved_bytes(), g.saved_bytes(), g.saved_bytes()}, 5},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.policy);
    const Schedule s = plan(c.policy, m);
    // Nothing is recomputed in the forward sweep: a pipeline stage's micro-batch holds only this.
    EXPECT_EQ(forward_sweep_end(s), 5u);
    const Trace t = run(m, s, 1, 0);
    EXPECT_EQ(t.saved_bytes_per_block, c.saved);
    EXPECT_EQ(t.plan.block_forwards, c.forwards);
    EXPECT_EQ(t.losses(), base.losses());
    EXPECT_EQ(t.grad_checksum, base.grad_checksum);
    EXPECT_EQ(t.peak_bytes, t.predicted_peak_bytes);
  }
  EXPECT_NE(message_of("uniform:layers=2,segments=2", m).find("not both"), std::string::npos);
  EXPECT_NE(message_of("uniform:layers=6", m).find("between 1 and the number of blocks (5), got 6"), std::string::npos);
  EXPECT_NE(message_of("block:layers=6", m).find("between 0 and the number of blocks (5), got 6"), std::string::npos);
}

TEST(ForwardSweep, EndsAtTheFirstBackwardRecomputePrefetchOrSecondForward) {
  const ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 4);
  EXPECT_EQ(forward_sweep_end(plan("none", m)), 4u);
  EXPECT_EQ(forward_sweep_end(plan("selective", m)), 4u);        // then: recompute 3
  EXPECT_EQ(forward_sweep_end(plan("uniform:segments=2", m)), 4u);  // then: backward 3
  Schedule s = store_all_schedule(2);
  s.actions.insert(s.actions.begin() + 1, Action{ActionKind::Offload, 0, Keep::all()});
  EXPECT_EQ(forward_sweep_end(s), 3u);  // an offload belongs to the forward sweep
  s.actions.insert(s.actions.begin() + 3, Action{ActionKind::Prefetch, 0, Keep::all()});
  EXPECT_EQ(forward_sweep_end(s), 3u);
  Schedule again;
  again.blocks = 2;
  again.forward(0, Keep::input());
  again.forward(1, Keep::all());
  again.forward(0, Keep::all());  // a second forward of block 0
  EXPECT_EQ(forward_sweep_end(again), 2u);
}

}  // namespace
}  // namespace remat
