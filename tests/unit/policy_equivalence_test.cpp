// Every policy, executed on the CPU backend (2 BLAS threads, dropout on), gives the same losses
// and gradients as `none` to the bit, for both architectures and both attention
// implementations, for a Llama whose MLP is GeGLU, a GPT-2 with the exact GELU and OLMo 2
// (QK-norm, norms after the sublayers); what the run itself recorded (block forwards, recompute FLOPs, the peak) equals the plan and the
// simulator; recomputation reruns exactly the first forward's ops, also when it runs inside a
// block's backward (selective by Megatron-LM's modules).
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <tuple>

#include "core/graph/block_graph.h"
#include "policy_test_util.h"

namespace remat {
namespace {

using test::plan;
using test::run;
using test::tiny;

struct EquivalenceCase {
  Family arch;
  AttentionImpl attn;
  std::optional<MlpKind> mlp = std::nullopt;  // the family's MLP when absent
  std::optional<OpKind> runs = std::nullopt;   // the op this configuration is here for
};

class PolicyEquivalence : public ::testing::TestWithParam<EquivalenceCase> {};

// The budget policy gets a budget between its smallest feasible one and none's peak.
std::uint64_t middle_budget(const ModelConfig& m) {
  std::uint64_t low = 0;
  try {
    plan("budget", m, 1);
  } catch (const std::exception& e) {
    std::string s = e.what();
    auto p = s.find("smallest feasible budget is ");
    EXPECT_NE(p, std::string::npos) << s;
    low = std::stoull(s.substr(p + 28));
  }
  std::uint64_t high = simulate(m, plan("none", m), nullptr).activation_peak_bytes;
  EXPECT_LT(low, high);
  return (low + high) / 2;
}

TEST_P(PolicyEquivalence, BitwiseEqualToNoneAndCountedFromTheRun) {
  ModelConfig m = tiny(GetParam().arch, GetParam().attn);
  if (GetParam().mlp) m.mlp = *GetParam().mlp;
  m.validate();
  const Trace base = run(m, plan("none", m));
  ASSERT_EQ(base.losses().size(), 2u);
  ASSERT_GT(base.losses()[0], 0.0);
  ASSERT_NE(base.grad_checksum, 0u);
  if (GetParam().runs) {  // the blocks ran that op, forward and backward
    const OpKind want = *GetParam().runs;
    std::string step;
    const BlockGraph graph(m);  // named: a temporary's steps() would dangle in the loop
    for (const auto& sd : graph.steps())
      if (sd.op == want) step = sd.name;
    ASSERT_FALSE(step.empty()) << "no step runs " << to_string(want);
    std::set<Phase> phases;
    for (const auto& o : base.ops)
      if (o.op == step) phases.insert(o.phase);
    EXPECT_TRUE(phases.count(Phase::Forward) && phases.count(Phase::Backward)) << step;
  }
  const std::uint64_t budget = middle_budget(m);
  // Megatron-LM's options too: every recompute module the block has, rebuilt inside the
  // backward (schedule version 2), and full recomputation by chunks and by the block method.
  std::string modules;
  for (const RecomputeModule& r : BlockGraph(m).recompute_modules()) modules += (modules.empty() ? "" : "+") + r.name;
  const std::vector<std::string> policies = {
      "selective", "selective:modules=" + modules, "uniform", "uniform:segments=4", "uniform:segments=1",
      "uniform:layers=3", "block:layers=2", "revolve:snapshots=1", "revolve:snapshots=2", "offload",
      "offload:what=checkpoints", "offload:prefetch=0", "offload:what=checkpoints,prefetch=2", "budget"};
  for (const auto& p : policies) {
    SCOPED_TRACE(p);
    Schedule s = plan(p, m, p == "budget" ? std::optional<std::uint64_t>(budget) : std::nullopt);
    Trace t = run(m, s);
    ASSERT_TRUE(t.complete);
    ASSERT_EQ(t.losses().size(), base.losses().size());
    for (std::size_t i = 0; i < base.losses().size(); ++i)
      EXPECT_EQ(t.losses()[i], base.losses()[i]) << "step " << i;  // bitwise
    EXPECT_EQ(t.grad_checksum, base.grad_checksum);
    // Executed, not only planned: the run's own records against the validator's plan.
    EXPECT_EQ(test::counted_block_forwards(t), t.plan.block_forwards);
    EXPECT_EQ(t.block_forwards, t.plan.block_forwards);
    EXPECT_EQ(test::counted_recompute_flops(t), t.plan.flops_recompute);
    EXPECT_EQ(t.flops.recompute, t.plan.flops_recompute);
    // The simulator's peak is the measured one, to the byte.
    EXPECT_EQ(t.predicted_peak_bytes, t.peak_bytes);
    // Recomputation reruns the first forward's ops with the same shapes (FLOPs and bytes).
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> first;
    for (const auto& o : t.ops)
      if (o.phase == Phase::Forward && o.block >= 0) first[o.name] = {o.flops, o.bytes};
    std::size_t rerun = 0;
    for (const auto& o : t.ops) {
      if (o.phase != Phase::Recompute) continue;
      ++rerun;
      auto it = first.find(o.name);
      ASSERT_NE(it, first.end()) << o.name << " was not run in the first forward";
      EXPECT_EQ(it->second.first, o.flops) << o.name;
      EXPECT_EQ(it->second.second, o.bytes) << o.name;
    }
    if (t.plan.flops_recompute > 0) EXPECT_GT(rerun, 0u);
    if (p == "budget") {
      EXPECT_LE(t.activation_peak_bytes, budget);
    }
    if (p.rfind("offload", 0) == 0) {
      std::uint64_t host = 0;
      for (auto b : t.host_bytes_per_block) host += b;
      EXPECT_GT(host, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    PolicyConfigs, PolicyEquivalence,
    ::testing::Values(EquivalenceCase{Family::Gpt2, AttentionImpl::Naive},
                      EquivalenceCase{Family::Gpt2, AttentionImpl::Flash},
                      // mixtures of experts: dropless on every layer; capacity-dropped with a dense layer
                      EquivalenceCase{Family::Mixtral, AttentionImpl::Naive, std::nullopt, OpKind::MoeRoute},
                      EquivalenceCase{Family::Mixtral, AttentionImpl::Flash, std::nullopt, OpKind::ExpertLinear},
                      EquivalenceCase{Family::Qwen3Moe, AttentionImpl::Naive, std::nullopt, OpKind::MoeUnpermute},
                      EquivalenceCase{Family::Qwen3Moe, AttentionImpl::Flash, std::nullopt, OpKind::MoePermute},
                      EquivalenceCase{Family::Qwen2Moe, AttentionImpl::Naive, std::nullopt, OpKind::SigmoidGate},
                      // multi-head latent attention: value heads narrower (V3) and wider (V2) than q and k
                      EquivalenceCase{Family::DeepseekV3, AttentionImpl::Naive, std::nullopt, OpKind::MlaPack},
                      EquivalenceCase{Family::DeepseekV3, AttentionImpl::Flash, std::nullopt, OpKind::MlaPack},
                      EquivalenceCase{Family::DeepseekV2, AttentionImpl::Flash, std::nullopt, OpKind::MlaPack},
                      EquivalenceCase{Family::Llama, AttentionImpl::Naive},
                      EquivalenceCase{Family::Llama, AttentionImpl::Flash},
                      EquivalenceCase{Family::Qwen2, AttentionImpl::Naive},
                      EquivalenceCase{Family::Qwen2, AttentionImpl::Flash},
                      EquivalenceCase{Family::Phi3, AttentionImpl::Naive},
                      EquivalenceCase{Family::Phi3, AttentionImpl::Flash},
                      EquivalenceCase{Family::Llama, AttentionImpl::Flash, MlpKind::GeGlu, OpKind::GeGlu},
                      // gpt-oss's clamped SwiGLU, on dense layers and on experts
                      EquivalenceCase{Family::Llama, AttentionImpl::Naive, MlpKind::SwiGluClamped, OpKind::SwiGluClamped},
                      EquivalenceCase{Family::Mixtral, AttentionImpl::Flash, MlpKind::SwiGluClamped, OpKind::SwiGluClamped},
                      // gpt-oss: attention sinks (their gradient summed in a fixed order), router bias,
                      // the load-balancing loss (its statistics rewritten alike by a recompute)
                      EquivalenceCase{Family::GptOss, AttentionImpl::Naive, std::nullopt, OpKind::AttnSoftmax},
                      EquivalenceCase{Family::GptOss, AttentionImpl::Flash, std::nullopt, OpKind::FlashAttn},
                      // Llama 4: chunks, the L2 norm, the temperature, the router weighting the experts' input
                      EquivalenceCase{Family::Llama4, AttentionImpl::Naive, std::nullopt, OpKind::Rope},
                      EquivalenceCase{Family::Llama4, AttentionImpl::Flash, std::nullopt, OpKind::QkHeadNorm},
                      EquivalenceCase{Family::Gpt2, AttentionImpl::Naive, MlpKind::Gelu, OpKind::GeluErf},
                      EquivalenceCase{Family::Olmo2, AttentionImpl::Naive, std::nullopt, OpKind::QkNorm},
                      EquivalenceCase{Family::Olmo2, AttentionImpl::Flash, std::nullopt, OpKind::QkNorm},
                      EquivalenceCase{Family::Qwen3, AttentionImpl::Naive, std::nullopt, OpKind::QkHeadNorm},
                      EquivalenceCase{Family::Qwen3, AttentionImpl::Flash, std::nullopt, OpKind::QkHeadNorm},
                      // Granite's multipliers (residual branches, embeddings, logits, scores)
                      EquivalenceCase{Family::Granite, AttentionImpl::Naive},
                      EquivalenceCase{Family::Granite, AttentionImpl::Flash},
                      // GPT-NeoX's parallel block, partial rotary, exact GELU
                      EquivalenceCase{Family::GptNeox, AttentionImpl::Naive},
                      EquivalenceCase{Family::GptNeox, AttentionImpl::Flash},
                      // Falcon 7B's multi-query attention and one norm for both branches
                      EquivalenceCase{Family::Falcon, AttentionImpl::Naive},
                      EquivalenceCase{Family::Falcon, AttentionImpl::Flash},
                      // Gemma 3: windowed and global blocks with their own RoPE, (1 + w) per-head QK-norm
                      EquivalenceCase{Family::Gemma3, AttentionImpl::Naive},
                      EquivalenceCase{Family::Gemma3, AttentionImpl::Flash},
                      // (1 + w) RMSNorms, the final one too, and embeddings * sqrt(hidden)
                      EquivalenceCase{Family::Gemma, AttentionImpl::Naive, std::nullopt, OpKind::RmsNorm},
                      EquivalenceCase{Family::Gemma, AttentionImpl::Flash, std::nullopt, OpKind::RmsNorm},
                      // banded attention (window 12 of 32), and Gemma 2's alternating windows,
                      // soft-caps and sandwich norms
                      EquivalenceCase{Family::Mistral, AttentionImpl::Naive},
                      EquivalenceCase{Family::Mistral, AttentionImpl::Flash},
                      EquivalenceCase{Family::Gemma2, AttentionImpl::Naive},
                      EquivalenceCase{Family::Gemma2, AttentionImpl::Flash},
                      // SmolLM3: block 3 without RoPE, a block table of its own
                      EquivalenceCase{Family::SmolLM3, AttentionImpl::Naive},
                      EquivalenceCase{Family::SmolLM3, AttentionImpl::Flash}),
    [](const ::testing::TestParamInfo<EquivalenceCase>& i) {
      return std::string(to_string(i.param.arch)) + "_" + to_string(i.param.attn) +
             (i.param.mlp ? std::string("_") + to_string(*i.param.mlp) : "");
    });

}  // namespace
}  // namespace remat
