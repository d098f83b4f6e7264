// The block table's saved bytes against the closed forms of Korthikanti et al. 2022, and the
// exact Llama breakdown.
#include <gtest/gtest.h>

#include <map>

#include "core/graph/block_graph.h"

namespace remat {
namespace {

ModelConfig gpt2(double dropout, AttentionImpl attn = AttentionImpl::Naive) {
  ModelConfig m;
  set_family(m, Family::Gpt2);
  m.layers = 2;
  m.hidden = 96;
  m.heads = 6;
  m.kv_heads = 6;
  m.ffn = 4 * 96;
  m.seq = 40;
  m.positions = 40;
  m.batch = 3;
  m.vocab = 256;
  m.dropout = dropout;
  m.attention = attn;
  return m;
}

TEST(BlockGraph, Gpt2NaiveWithDropoutSavesKorthikantiBytes) {
  ModelConfig m = gpt2(0.1);
  BlockGraph g(m);
  const std::uint64_t sbh = 40ull * 3 * 96, as2b = 6ull * 40 * 40 * 3;
  EXPECT_EQ(g.saved_bytes(), 34 * sbh + 5 * as2b);
}

TEST(BlockGraph, Gpt2NaiveWithoutDropoutDropsMasks) {
  BlockGraph g(gpt2(0.0));
  const std::uint64_t sbh = 40ull * 3 * 96, as2b = 6ull * 40 * 40 * 3;
  EXPECT_EQ(g.saved_bytes(), 32 * sbh + 2 * as2b);
  EXPECT_FALSE(g.find("attn.drop_mask").has_value());
}

TEST(BlockGraph, Gpt2FlashKeepsLseNotProbabilities) {
  BlockGraph g(gpt2(0.1, AttentionImpl::Flash));
  const std::uint64_t sbh = 40ull * 3 * 96, asb = 6ull * 40 * 3;
  EXPECT_EQ(g.saved_bytes(), 34 * sbh + 4 * asb);
  EXPECT_FALSE(g.find("attn.probs").has_value());
}

TEST(BlockGraph, SelectiveDefaultNaiveLeaves34sbh) {
  BlockGraph g(gpt2(0.1));
  const std::uint64_t sbh = 40ull * 3 * 96;
  EXPECT_EQ(g.saved_bytes_without(g.default_selective()), 34 * sbh);
}

TEST(BlockGraph, Fp32DoublesActivationBytesButNotMasks) {
  ModelConfig m = gpt2(0.1);
  m.dtype = DType::F32;
  BlockGraph g(m);
  const std::uint64_t sbh = 40ull * 3 * 96, as2b = 6ull * 40 * 40 * 3;
  // 32 of the 34 are 16-bit activations (now 4 bytes), 2 are one-byte masks.
  EXPECT_EQ(g.saved_bytes(), 64 * sbh + 2 * sbh + 9 * as2b);
}

TEST(BlockGraph, LlamaGqaBreakdown) {
  ModelConfig m;
  set_family(m, Family::Llama);
  m.layers = 2;
  m.hidden = 128;
  m.heads = 8;
  m.kv_heads = 2;
  m.ffn = 352;
  m.seq = 32;
  m.positions = 32;
  m.batch = 2;
  m.dropout = 0.0;
  BlockGraph g(m);
  const std::uint64_t s = 32, b = 2, h = 128, f = 352, a = 8, kv = 2, d = 16;
  // block.in, ln1.out, rotated q|k|v, probs, ctx, ln2.in, ln2.out, gate|up, act.
  std::uint64_t expect = 2 * s * b * h + 2 * s * b * h + 2 * s * b * (h + 2 * kv * d) +
                         2 * a * s * s * b + 2 * s * b * h + 2 * s * b * h + 2 * s * b * h +
                         4 * s * b * f + 2 * s * b * f;
  EXPECT_EQ(g.saved_bytes(), expect);
  EXPECT_FALSE(g.tensors()[*g.find("attn.qkv_raw")].saved);
}

// Each MLP kind runs its own activation op; the tanh and exact GELU save the same tensors, as
// do SwiGLU and GeGLU (all four backwards read only their input).
TEST(BlockGraph, MlpActivationOfEveryKind) {
  struct Case {
    MlpKind mlp;
    const char* step;
    OpKind op;
    const char* input;
  };
  const Case cases[] = {{MlpKind::GeluTanh, "mlp.gelu", OpKind::Gelu, "mlp.gelu_in"},
                        {MlpKind::Gelu, "mlp.gelu", OpKind::GeluErf, "mlp.gelu_in"},
                        {MlpKind::SwiGlu, "mlp.swiglu", OpKind::SwiGlu, "mlp.gate_up"},
                        {MlpKind::GeGlu, "mlp.geglu", OpKind::GeGlu, "mlp.gate_up"},
                        {MlpKind::SwiGluClamped, "mlp.swiglu", OpKind::SwiGluClamped, "mlp.gate_up"}};
  std::map<bool, std::uint64_t> saved;  // by gated
  for (const Case& c : cases) {
    SCOPED_TRACE(to_string(c.mlp));
    ModelConfig m = gpt2(0.1);
    m.mlp = c.mlp;
    BlockGraph g(m);
    int found = 0;
    for (const StepDef& s : g.steps())
      if (s.name == c.step) {
        ++found;
        EXPECT_EQ(s.op, c.op);
        ASSERT_EQ(s.in.size(), 1u);
        EXPECT_EQ(g.tensors()[s.in[0]].name, c.input);
        EXPECT_TRUE(g.tensors()[s.in[0]].saved);
        EXPECT_EQ(g.tensors()[s.out[0]].name, m.gated_mlp() ? "mlp.act" : "mlp.gelu_out");
      }
    EXPECT_EQ(found, 1);
    auto [it, fresh] = saved.emplace(m.gated_mlp(), g.saved_bytes());
    if (!fresh) EXPECT_EQ(g.saved_bytes(), it->second);
  }
}

// QK-norm follows the qkv projection and reads its raw output; RoPE reads nothing, so the
// normalized qkv is not saved (with RoPE) and the block saves raw and rotated qkv.
TEST(BlockGraph, QkNormAfterTheQkvProjection) {
  for (bool rope : {true, false}) {
    SCOPED_TRACE(rope ? "rope" : "learned positions");
    ModelConfig m = gpt2(0.0);
    set_family(m, Family::Olmo2);
    m.kv_heads = 2;
    m.ffn = 256;
    if (!rope) m.position = PositionKind::Learned;
    BlockGraph g(m);
    const StepDef* qk = nullptr;
    for (const StepDef& s : g.steps())
      if (s.op == OpKind::QkNorm) qk = &s;
    ASSERT_NE(qk, nullptr);
    EXPECT_EQ(qk->name, "attn.qk_norm");
    EXPECT_EQ(qk->w, "attn.q_norm.w");
    EXPECT_EQ(qk->b, "attn.k_norm.w");
    EXPECT_EQ(qk->K, m.q_width());
    EXPECT_EQ(qk->N, m.kv_width());
    EXPECT_EQ(g.tensors()[qk->in[0]].name, "attn.qkv_raw");
    EXPECT_TRUE(g.tensors()[qk->in[0]].saved);
    const std::string out = g.tensors()[qk->out[0]].name;
    EXPECT_EQ(out, rope ? "attn.qkv_normed" : "attn.qkv");
    EXPECT_EQ(g.tensors()[qk->out[0]].saved, !rope);  // attention reads it when no RoPE follows
    const auto qkv = g.find("attn.qkv");  // what attention reads: rotated, or the norm's output
    ASSERT_TRUE(qkv.has_value());
    const int qk_step = static_cast<int>(qk - g.steps().data());
    EXPECT_EQ(g.tensors()[*qkv].producer, rope ? qk_step + 1 : qk_step);
  }
}

TEST(BlockGraph, RecomputeFromInputRunsTheWholeBlockButNotItsOutput) {
  BlockGraph g(gpt2(0.1));
  std::vector<bool> live(g.tensors().size(), false), targets(g.tensors().size(), false);
  live[g.input()] = true;
  for (std::size_t t = 0; t < g.tensors().size(); ++t) targets[t] = g.tensors()[t].saved;
  std::vector<int> steps;
  auto f = g.recompute_flops(live, targets, &steps);
  ASSERT_TRUE(f.has_value());
  // Everything but the MLP down projection and the last residual.
  EXPECT_EQ(steps.size(), g.steps().size() - 2);
  EXPECT_LT(*f, g.flops_forward());
}

TEST(BlockGraph, RecomputeWithoutInputIsImpossible) {
  BlockGraph g(gpt2(0.0));
  std::vector<bool> live(g.tensors().size(), false), targets(g.tensors().size(), false);
  targets[*g.find("ln1.out")] = true;
  EXPECT_FALSE(g.recompute_flops(live, targets).has_value());
}

}  // namespace
}  // namespace remat
