// Per-block saved bytes, measured from the allocator's events of a real run, against the
// closed forms of the selective defaults and the uniform segments; the order of the peaks.
#include <gtest/gtest.h>

#include "core/graph/block_graph.h"
#include "policy_test_util.h"

namespace remat {
namespace {

using test::plan;
using test::run;
using test::tiny;

struct Dims {
  std::uint64_t s, b, h, a, f, kv, d;
  explicit Dims(const ModelConfig& m)
      : s(m.seq), b(m.batch), h(m.hidden), a(m.heads), f(m.ffn), kv(m.kv_heads), d(m.head_dim()) {}
  std::uint64_t sbh() const { return s * b * h; }
};

void expect_every_block(const Trace& t, std::uint64_t bytes) {
  ASSERT_EQ(t.saved_bytes_per_block.size(), static_cast<std::size_t>(t.model.layers));
  for (int b = 0; b < t.model.layers; ++b) EXPECT_EQ(t.saved_bytes_per_block[b], bytes) << "block " << b;
}

TEST(PolicySelective, Gpt2NaiveDefaultLeaves34sbhPerBlock) {
  ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive);
  Trace t = run(m, plan("selective", m), 1, 0);
  expect_every_block(t, 34 * Dims(m).sbh());
}

TEST(PolicySelective, Gpt2FlashDefaultLeaves22sbhPlusLse) {
  ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Flash);
  Dims x(m);
  Trace t = run(m, plan("selective", m), 1, 0);
  // 34·s·b·h + 4·a·s·b without ln1.out (2), ln2.out (2) and mlp.gelu_out (8, f = 4h).
  expect_every_block(t, 22 * x.sbh() + 4 * x.a * x.s * x.b);
}

TEST(PolicySelective, LlamaNaiveDefault) {
  ModelConfig m = tiny(Family::Llama, AttentionImpl::Naive);
  Dims x(m);
  Trace t = run(m, plan("selective", m), 1, 0);
  // block.in, ln1.out, ctx, ln2.in, ln2.out (2 each), two masks (1 each), rotated q|k|v,
  // gate|up (4·s·b·f) and the SwiGLU output (2·s·b·f).
  expect_every_block(t, 12 * x.sbh() + 2 * x.s * x.b * (x.h + 2 * x.kv * x.d) + 6 * x.s * x.b * x.f);
}

TEST(PolicySelective, LlamaFlashDefault) {
  ModelConfig m = tiny(Family::Llama, AttentionImpl::Flash);
  Dims x(m);
  Trace t = run(m, plan("selective", m), 1, 0);
  // block.in, ctx, ln2.in (2 each), two masks, q|k|v, lse (4·a·s·b) and gate|up.
  expect_every_block(t, 8 * x.sbh() + 2 * x.s * x.b * (x.h + 2 * x.kv * x.d) +
                            4 * x.a * x.s * x.b + 4 * x.s * x.b * x.f);
}

TEST(PolicySelective, AnySubsetWorksBitwise) {
  ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  BlockGraph g(m);
  Trace base = run(m, plan("none", m), 1, 0);
  std::vector<std::string> everything;
  for (const auto& n : g.saved_names())
    if (n != "block.in") everything.push_back(n);
  std::vector<std::vector<std::string>> subsets = {
      {"ln1.out", "ln2.out"}, {"attn.qkv"}, {"mlp.gelu_in", "mlp.gelu_out"},
      {"attn.ctx", "attn.probs"}, {"attn.res_mask", "ln2.in"}, everything};
  for (const auto& sub : subsets) {
    std::string p = "selective:recompute=";
    for (std::size_t i = 0; i < sub.size(); ++i) p += (i ? "+" : "") + sub[i];
    SCOPED_TRACE(p);
    Trace t = run(m, plan(p, m), 1, 0);
    EXPECT_EQ(t.losses(), base.losses());
    EXPECT_EQ(t.grad_checksum, base.grad_checksum);
    expect_every_block(t, g.saved_bytes_without(sub));
  }
}

TEST(PolicySelective, FlashSubsetsRebuildNextToKeptOutputs) {
  // Dropping attn.ctx but keeping attn.lse recomputes both (one into a temporary).
  ModelConfig m = tiny(Family::Llama, AttentionImpl::Flash, 2);
  BlockGraph g(m);
  Trace base = run(m, plan("none", m), 1, 0);
  for (const std::vector<std::string>& sub :
       {std::vector<std::string>{"attn.ctx"}, {"attn.lse"}, {"attn.qkv", "attn.ctx"}, {"mlp.gate_up", "mlp.act"}}) {
    std::string p = "selective:recompute=";
    for (std::size_t i = 0; i < sub.size(); ++i) p += (i ? "+" : "") + sub[i];
    SCOPED_TRACE(p);
    Trace t = run(m, plan(p, m), 1, 0);
    EXPECT_EQ(t.losses(), base.losses());
    EXPECT_EQ(t.grad_checksum, base.grad_checksum);
    EXPECT_EQ(t.peak_bytes, t.predicted_peak_bytes);
    expect_every_block(t, g.saved_bytes_without(sub));
  }
}

TEST(PolicySelective, RefusesTheBlockInputAndUnknownNames) {
  ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive);
  EXPECT_THROW(plan("selective:recompute=block.in", m), Error);
  EXPECT_THROW(plan("selective:recompute=attn.proj_out", m), Error);  // not saved
  EXPECT_THROW(plan("selective:recompute=no.such", m), Error);
}

TEST(PolicyUniform, SavedBytesPerBlock) {
  ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 5);
  BlockGraph g(m);
  const std::uint64_t in = g.tensors()[g.input()].bytes, all = g.saved_bytes();
  {
    // Default: round(sqrt(5)) = 2 segments of 3 and 2 blocks; the last one is stored.
    Trace t = run(m, plan("uniform", m), 1, 0);
    EXPECT_EQ(t.saved_bytes_per_block, (std::vector<std::uint64_t>{in, 0, 0, all, all}));
    EXPECT_EQ(t.plan.block_forwards, 5u + 3u);
  }
  {
    Trace t = run(m, plan("uniform:segments=5", m), 1, 0);
    EXPECT_EQ(t.saved_bytes_per_block, (std::vector<std::uint64_t>{in, in, in, in, all}));
    EXPECT_EQ(t.plan.block_forwards, 5u + 4u);
  }
  {
    // 3 segments of 2, 2 and 1 blocks.
    Trace t = run(m, plan("uniform:segments=3", m), 1, 0);
    EXPECT_EQ(t.saved_bytes_per_block, (std::vector<std::uint64_t>{in, 0, in, 0, all}));
    EXPECT_EQ(t.plan.block_forwards, 5u + 4u);
  }
  EXPECT_THROW(plan("uniform:segments=6", m), Error);
}

TEST(PolicyUniform, RecomputedSegmentDoesNotRerunItsLastOutputGemm) {
  ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 4);
  Trace t = run(m, plan("uniform:segments=2", m), 1, 0);
  // Segment [0, 2) is recomputed: block 0 runs whole (its output is block 1's input), block 1
  // stops before its MLP down projection.
  int fc2_block0 = 0, fc2_block1 = 0;
  for (const auto& o : t.ops) {
    if (o.phase != Phase::Recompute) continue;
    if (o.name == "h0.mlp.fc2") ++fc2_block0;
    if (o.name == "h1.mlp.fc2") ++fc2_block1;
  }
  EXPECT_EQ(fc2_block0, 1);
  EXPECT_EQ(fc2_block1, 0);
}

TEST(PolicyMemory, PeaksOrderOnNaiveAttention) {
  ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 4);
  auto peak = [&](const std::string& p) {
    Trace t = run(m, plan(p, m), 1, 0);
    EXPECT_EQ(t.peak_bytes, t.predicted_peak_bytes) << p;
    return t.peak_bytes;
  };
  const std::uint64_t none = peak("none"), sel = peak("selective"), sqrt_l = peak("uniform"),
                      per_block = peak("uniform:segments=4");
  EXPECT_GT(none, sel);
  EXPECT_GT(none, sqrt_l);
  EXPECT_GT(sqrt_l, per_block);
}

TEST(PolicyOffload, HostBytesInTheirOwnCategoryAndSpace) {
  ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 4);
  BlockGraph g(m);
  Trace t = run(m, plan("offload", m), 1, 0);
  // prefetch = 1: blocks 0..2 go to the host, block 3 stays.
  EXPECT_EQ(t.host_bytes_per_block, (std::vector<std::uint64_t>{g.saved_bytes(), g.saved_bytes(),
                                                                 g.saved_bytes(), 0}));
  EXPECT_EQ(t.saved_bytes_per_block, (std::vector<std::uint64_t>{0, 0, 0, g.saved_bytes()}));
  std::int64_t host = 0, host_other = 0;
  for (std::size_t i = t.step_first_event; i < t.events.size(); ++i) {
    const auto& e = t.events[i];
    if (e.space != Space::Host) continue;
    if (e.category == Category::HostOffloaded) host += e.delta > 0 ? e.delta : 0;
    else host_other += e.delta > 0 ? e.delta : 0;
  }
  EXPECT_EQ(host, static_cast<std::int64_t>(3 * g.saved_bytes()));
  EXPECT_EQ(host_other, 0);
  Trace c = run(m, plan("offload:what=checkpoints", m), 1, 0);
  const std::uint64_t in = g.tensors()[g.input()].bytes;
  EXPECT_EQ(c.host_bytes_per_block, (std::vector<std::uint64_t>{in, in, in, 0}));
  EXPECT_EQ(c.plan.block_forwards, 4u + 3u);
}

}  // namespace
}  // namespace remat
