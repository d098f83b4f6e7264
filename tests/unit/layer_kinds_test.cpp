// Layer kinds (core/model/layer_kind.h): a model's layers given kinds and a pattern train as the
// same model described by its features does, to the bit; a pattern no feature describes is
// trained as listed; our JSON reads and writes them, and refuses what it does not model.
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "core/graph/parallel_layout.h"
#include "core/model/model_config.h"
#include "core/util/error.h"
#include "policy_test_util.h"

namespace remat {
namespace {

// The message our JSON refuses `j` changed by `change` with ("accepted" when it reads).
std::string refusal_of(nlohmann::json j, const std::function<void(nlohmann::json&)>& change) {
  change(j);
  try {
    model_from_json(j);
  } catch (const ConfigError& e) {
    return std::string(e.what());
  }
  return std::string("accepted");
}

void says(const std::string& what, const std::string& part) { EXPECT_NE(what.find(part), std::string::npos) << what; }

// Gemma 3's features at this size: blocks 1 and 3 global (window_pattern 2), the windowed ones
// on their own base (10000) without the global ones' linear scaling.
ModelConfig by_features() {
  ModelConfig m = test::tiny(Family::Gemma3, AttentionImpl::Naive);
  m.rope_scaling.type = RopeType::Linear;
  m.rope_scaling.factor = 8.0;
  return m;
}

// The same layers as kinds.
ModelConfig by_kinds(std::vector<int> pattern) {
  ModelConfig m = by_features();
  m.layer_kinds = {LayerKind{"local", m.sliding_window, m.rope_local_theta}, LayerKind{"global"}};
  m.layer_pattern = std::move(pattern);
  m.sliding_window = 0;
  m.window_pattern = 0;
  m.rope_local_theta = 0.0;
  m.validate();
  return m;
}

TEST(LayerKinds, KindsGivingTheFeaturesLayersTrainTheSameBits) {
  const ModelConfig f = by_features(), k = by_kinds({0, 1});  // local, global, repeated
  for (int b = 0; b < f.layers; ++b) {
    EXPECT_EQ(k.window_of(b), f.window_of(b)) << b;
    EXPECT_EQ(k.rope_base_of(b), f.rope_base_of(b)) << b;
  }
  const Trace a = test::run(f, test::plan_here("none", f)), b = test::run(k, test::plan_here("none", k));
  ASSERT_EQ(a.losses().size(), b.losses().size());
  for (std::size_t i = 0; i < a.losses().size(); ++i) EXPECT_EQ(a.losses()[i], b.losses()[i]) << "step " << i;
  EXPECT_EQ(a.grad_checksum, b.grad_checksum);
  EXPECT_EQ(a.peak_bytes, b.peak_bytes);
  EXPECT_EQ(b.peak_bytes, b.predicted_peak_bytes);
  // Another pattern (global first, then three local) trains another model.
  const ModelConfig other = by_kinds({1, 0, 0, 0});
  EXPECT_EQ(other.window_of(0), 0);
  EXPECT_EQ(other.window_of(3), 12);
  const Trace c = test::run(other, test::plan_here("none", other));
  EXPECT_NE(c.losses().back(), a.losses().back());
  EXPECT_NE(c.grad_checksum, a.grad_checksum);
}

TEST(LayerKinds, APipelineStagesTableCountsTheWindowsOfItsOwnBlocks) {
  const ModelConfig m = by_kinds({1, 1, 1, 0});  // blocks 0-2 global, block 3 local
  ParallelLayout p;
  p.pp = 2;
  const BlockGraph stage = per_rank_graph(m, p, 1);  // blocks 2 and 3
  EXPECT_EQ(stage.first_block(), 2);
  EXPECT_FALSE(stage.windowed(0));
  EXPECT_TRUE(stage.windowed(1));
  EXPECT_LT(stage.flops_forward(1), stage.flops_forward(0));  // the band of a 12-token window at s = 32
  EXPECT_FALSE(per_rank_graph(m, p, 0).windowed(1));
}

TEST(LayerKinds, OurJsonReadsAndWritesThem) {
  nlohmann::json j = model_to_json(by_features());
  for (const char* k : {"sliding_window", "sliding_window_pattern"}) j.erase(k);
  j["layer_kinds"] = nlohmann::json::array({{{"name", "local"}, {"window", 12}, {"rope_theta", 10000.0}},
                                            {{"name", "global"}}});
  j["layer_pattern"] = {"global", "local", "local"};  // repeated over the 4 layers
  const ModelConfig m = model_from_json(j);
  EXPECT_EQ(m.window_of(0), 0);
  EXPECT_EQ(m.window_of(1), 12);
  EXPECT_EQ(m.window_of(3), 0);  // the pattern's first entry again
  EXPECT_EQ(m.rope_base_of(2), 10000.0);
  EXPECT_EQ(m.rope_base_of(3), 0.0);
  const nlohmann::json back = model_to_json(m);
  EXPECT_EQ(back.at("layer_kinds"), j.at("layer_kinds"));
  EXPECT_EQ(back.at("layer_pattern"), j.at("layer_pattern"));
  EXPECT_FALSE(back.contains("sliding_window_pattern"));
  EXPECT_EQ(model_from_json(back).layer_pattern, m.layer_pattern);

  auto refused = [&j](const std::function<void(nlohmann::json&)>& change) { return refusal_of(j, change); };
  says(refused([](auto& b) { b["layer_pattern"][1] = "sliding"; }), "entry 1 is \"sliding\", not a listed layer kind (local, global)");
  says(refused([](auto& b) { b.erase("layer_pattern"); }), "layer_pattern");
  says(refused([](auto& b) { b["layer_kinds"][0]["windw"] = 3; }), "layer_kinds.local.windw");
  says(refused([](auto& b) { b["layer_kinds"][0]["rope"] = false; }), "layer_kinds.local.rope_theta: is given for a kind without RoPE");
  says(refused([](auto& b) { b["layer_kinds"][1]["mlp"] = "moe"; }), "moe needs the model's experts");
  says(refused([](auto& b) { b["layer_kinds"][1]["window"] = 4; }), "windows of several sizes are not modelled yet");
  says(refused([](auto& b) { b["layer_kinds"][1]["name"] = "local"; }), "is listed twice");
  says(refused([](auto& b) { b["layer_kinds"][0]["window"] = -1; }), "layer_kinds.local.window");
  says(refused([](auto& b) { b["sliding_window"] = 12; }), "sliding_window");
  says(refused([](auto& b) { b["layer_kinds"] = nlohmann::json::array(); }), "must be a list of layer kinds");
  says(refused([](auto& b) {
         b["position"] = "learned";
         b["positions"] = 32;
       }),
       "needs rotary positions");
  says(refused([](auto& b) {
         b["layer_kinds"][1]["rope"] = false;
         b["layer_kinds"][0].erase("rope_theta");
         b["position"] = "learned";
         b["positions"] = 32;
       }),
       "layer_kinds.global.rope: false leaves out rotary positions, which the model does not have");
}

// Llama 4's chunked attention as a layer kind: chunks of 6 tokens (the last of s = 32 shorter)
// on blocks 0 and 2, full attention on 1 and 3.
ModelConfig chunked(int chunk, AttentionImpl attn = AttentionImpl::Naive) {
  ModelConfig m = test::tiny(Family::Llama, attn);
  m.dtype = DType::F32;  // (flash and naive then agree to fp32 rounding)
  LayerKind c{"chunked_attention"};
  c.chunk = chunk;
  m.layer_kinds = {c, LayerKind{"full_attention"}};
  m.layer_pattern = {0, 1};
  m.validate();
  return m;
}

TEST(LayerKinds, ChunkedLayersAttendWithinTheirChunk) {
  const ModelConfig m = chunked(6);
  EXPECT_EQ(m.chunk_of(0), 6);
  EXPECT_EQ(m.chunk_of(1), 0);
  EXPECT_EQ(m.window_of(0), 0);
  const BlockGraph g(m);
  EXPECT_TRUE(g.windowed(0));
  EXPECT_FALSE(g.windowed(1));
  // The attention FLOPs count the visible pairs: 5 chunks of 6 and one of 2 at s = 32 hold
  // 5·21 + 3 = 108 of the 528 causal pairs, so sq = 2·108 − 32 = 184 against 32² = 1024.
  for (const StepDef& s : g.steps())
    if (s.op == OpKind::AttnSoftmax) {
      EXPECT_EQ(s.sq, 184u);
      EXPECT_EQ(s.sq_full, 1024u);
    }
  EXPECT_LT(g.flops_forward(0), g.flops_forward(1));

  // The chunks change the step; a chunk as long as the sequence leaves it as it was, bit for bit.
  ModelConfig full = chunked(6);
  full.layer_kinds[0].chunk = 0;
  const Trace c = test::run(m, test::plan_here("none", m)), f = test::run(full, test::plan_here("none", full)),
              whole = test::run(chunked(32), test::plan_here("none", chunked(32)));
  EXPECT_NE(c.losses().back(), f.losses().back());
  EXPECT_EQ(whole.losses().back(), f.losses().back());
  EXPECT_EQ(whole.grad_checksum, f.grad_checksum);
  EXPECT_EQ(c.peak_bytes, c.predicted_peak_bytes);
  // Flash attention's tiles give the same losses to rounding.
  const ModelConfig mf = chunked(6, AttentionImpl::Flash);
  const Trace cf = test::run(mf, test::plan_here("none", mf));
  EXPECT_NEAR(cf.losses().back(), c.losses().back(), 1e-5);
  EXPECT_EQ(cf.peak_bytes, cf.predicted_peak_bytes);
  // Recomputing under a policy changes no bit.
  for (const char* policy : {"block", "selective"}) {
    const Trace p = test::run(mf, test::plan_here(policy, mf));
    EXPECT_EQ(p.losses(), cf.losses()) << policy;
    EXPECT_EQ(p.grad_checksum, cf.grad_checksum) << policy;
    EXPECT_EQ(p.peak_bytes, p.predicted_peak_bytes) << policy;
  }
}

TEST(LayerKinds, ChunksReadAndWriteAndAreRefusedByName) {
  const nlohmann::json j = model_to_json(chunked(6));
  EXPECT_EQ(j.at("layer_kinds")[0].at("chunk"), 6);
  EXPECT_EQ(model_from_json(j).layer_kinds, chunked(6).layer_kinds);
  auto refused = [&j](const std::function<void(nlohmann::json&)>& change) { return refusal_of(j, change); };
  says(refused([](auto& b) { b["layer_kinds"][0]["chunk"] = -6; }), "layer_kinds.chunked_attention.chunk: must be 0");
  says(refused([](auto& b) { b["layer_kinds"][0]["window"] = 4; }), "and window are both given");
  says(refused([](auto& b) { b["layer_kinds"][1]["chunk"] = 4; }), "chunks of several sizes are not modelled yet");
  says(refused([](auto& b) { b["layer_kinds"][1]["window"] = 4; }), "sliding windows and attention chunks");
}

}  // namespace
}  // namespace remat
