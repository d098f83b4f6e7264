// The ledger's `why` column (core/engine/ledger_why.h) on real CPU runs: what it says of kept,
// rebuilt and checkpointed tensors, against the block table's own steps and FLOPs.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/engine/ledger_why.h"
#include "policy_test_util.h"

namespace remat {
namespace {

bool has(const std::string& s, const std::string& w) { return s.find(w) != std::string::npos; }

const LedgerEntry* row(const Trace& t, int block, const std::string& tensor, const std::string& decision) {
  for (const LedgerEntry& l : t.ledger)
    if (l.block == block && l.tensor == tensor && l.decision == decision) return &l;
  return nullptr;
}

TEST(LedgerWhy, FlopsInWords) {
  EXPECT_EQ(flops_in_words(0), "0 FLOP");
  EXPECT_EQ(flops_in_words(999), "999 FLOP");
  EXPECT_EQ(flops_in_words(42200000), "42.2 MFLOP");
  EXPECT_EQ(flops_in_words(999999), "1 MFLOP");
  EXPECT_EQ(flops_in_words(1500000000000000000ULL), "1.5 EFLOP");
}

// Under the minimum cut (`optimal` without a budget) every tensor a block keeps besides its
// input is one whose rebuilding would run a weight GEMM again (else fewer bytes would do), and
// its row names that GEMM; what it drops is rebuilt, and says by which steps.
TEST(LedgerWhy, TheMinimumCutKeepsOnlyWhatAWeightGemmWouldRebuild) {
  for (Family f : {Family::Gpt2, Family::Llama, Family::Gemma3, Family::Mixtral, Family::DeepseekV3}) {
    const ModelConfig m = test::tiny(f, AttentionImpl::Flash, 0.1, 2);
    const Trace t = test::run(m, test::plan("optimal", m), 1, 0);
    ASSERT_TRUE(t.complete) << t.error;
    int kept = 0, rebuilt = 0;
    for (const LedgerEntry& l : t.ledger) {
      EXPECT_FALSE(l.why.empty()) << to_string(f) << " " << l.tensor << " " << l.decision;
      if (l.decision == "kept" && l.tensor != "block.in") {
        ++kept;
        EXPECT_TRUE(has(l.why, "weight GEMM")) << to_string(f) << " " << l.tensor << ": " << l.why;
      }
      if (l.decision == "recomputed") {
        ++rebuilt;
        EXPECT_TRUE(has(l.why, "alone it needs ")) << to_string(f) << " " << l.tensor << ": " << l.why;
      }
    }
    EXPECT_GT(kept, 0) << to_string(f);
    EXPECT_GT(rebuilt, 0) << to_string(f);
  }
}

// Storing everything: a norm's output would cost that norm's FLOPs, a projection's output its
// GEMM, and the block's input comes from the block before.
TEST(LedgerWhy, StoringEverythingSaysWhatEachWouldCost) {
  const ModelConfig m = test::tiny(Family::Gpt2, AttentionImpl::Naive, 0.1, 2);
  const BlockGraph g(m);
  const Trace t = test::run(m, test::plan("none", m), 1, 0);
  ASSERT_TRUE(t.complete) << t.error;
  auto producer = [&](const char* name) { return g.steps()[static_cast<std::size_t>(g.tensors()[*g.find(name)].producer)]; };
  const LedgerEntry* ln = row(t, 1, "ln1.out", "kept");
  ASSERT_NE(ln, nullptr);
  const StepDef& ln1 = producer("ln1.out");
  EXPECT_EQ(ln->why, "kept: rebuilding it would cost " + flops_in_words(ln1.flops_fwd) + " (" + ln1.name + ")");
  const LedgerEntry* qkv = row(t, 1, "attn.qkv", "kept");
  ASSERT_NE(qkv, nullptr);
  const StepDef& proj = producer("attn.qkv");
  EXPECT_EQ(proj.kind, StepKind::Gemm);
  EXPECT_EQ(qkv->why, "kept: rebuilding it runs a weight GEMM again (" + proj.name + "), " + flops_in_words(proj.flops_fwd) + " in all");
  const LedgerEntry* in = row(t, 1, "block.in", "kept");
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->why, "the block's input, made by the block before it");
  const LedgerEntry* first = row(t, 0, "block.in", "kept");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->why, "the first block's input, made by the embedding");
}

// Segments of two blocks rebuilt from the first one's input: the second block held nothing
// after its forward, its tensors are rebuilt from its input (itself rebuilt by the block before).
TEST(LedgerWhy, BlocksInsideARecomputedSegmentAreRebuiltFromTheirInput) {
  const ModelConfig m = test::tiny(Family::Llama, AttentionImpl::Flash, 0.0, 4);
  const Trace t = test::run(m, test::plan("uniform:segments=2", m), 1, 0);
  ASSERT_TRUE(t.complete) << t.error;
  int rebuilt = 0;
  for (const LedgerEntry& l : t.ledger) {
    if (l.decision != "recomputed") continue;
    ++rebuilt;
    if (l.tensor == "block.in") EXPECT_EQ(l.why, "the block's input, rebuilt by the block before it in the backward");
    else EXPECT_TRUE(has(l.why, "alone it needs ")) << l.block << " " << l.tensor << ": " << l.why;
    // The second block of each segment held nothing: rebuilt from its input.
    if (l.block % 2 == 1 && l.tensor != "block.in") EXPECT_TRUE(has(l.why, "rebuilt from the block's input")) << l.why;
  }
  EXPECT_GT(rebuilt, 0);
}

// Checkpointing every block: the input is the checkpoint, and a rebuilt projection names the
// norm and the GEMM that rebuilt it from that input, with their FLOPs.
TEST(LedgerWhy, ACheckpointedBlockSaysWhatRebuiltEachTensor) {
  const ModelConfig m = test::tiny(Family::Llama, AttentionImpl::Flash, 0.0, 2);
  const BlockGraph g(m);
  const Trace t = test::run(m, test::plan("block", m), 1, 0);
  ASSERT_TRUE(t.complete) << t.error;
  const LedgerEntry* cp = row(t, 0, "block.in", "checkpoint");
  ASSERT_NE(cp, nullptr);
  EXPECT_TRUE(has(cp->why, "runs the block's forward again")) << cp->why;
  const LedgerEntry* qkv = row(t, 0, "attn.qkv", "recomputed");
  ASSERT_NE(qkv, nullptr);
  // From the input alone: every step attn.qkv comes from (the norm, the projection, RoPE).
  std::vector<bool> from(g.steps().size(), false);
  std::vector<int> todo{*g.find("attn.qkv")};
  while (!todo.empty()) {
    const int p = g.tensors()[static_cast<std::size_t>(todo.back())].producer;
    todo.pop_back();
    if (p < 0 || from[static_cast<std::size_t>(p)]) continue;
    from[static_cast<std::size_t>(p)] = true;
    for (int i : g.steps()[static_cast<std::size_t>(p)].in) todo.push_back(i);
  }
  std::string names;
  std::uint64_t flops = 0;
  for (std::size_t s = 0; s < from.size(); ++s)
    if (from[s]) names += (names.empty() ? "" : ", ") + g.steps()[s].name, flops += g.steps()[s].flops_fwd;
  EXPECT_TRUE(has(names, "ln1")) << names;
  EXPECT_EQ(qkv->why, "rebuilt from what the block held; alone it needs " + names + ": " + flops_in_words(flops));
  // The forward's copy of a tensor dropped after the forward says so.
  const LedgerEntry* dropped = row(t, 0, "attn.qkv", "discarded");
  if (dropped) EXPECT_TRUE(has(dropped->why, "rebuilt before the backward")) << dropped->why;
}

}  // namespace
}  // namespace remat
