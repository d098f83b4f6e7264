// Layers without RoPE (a layer kind with rope: false; SmolLM3's no_rope_layers): their blocks have
// a table of their own without the rotary step, train exactly under every policy (the losses of
// none bit for bit, the predicted peak the measured one), and the import reads SmolLM3's
// per-layer list or, without one, transformers' default from its interval.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/analysis/measured_costs.h"
#include "core/graph/parallel_layout.h"
#include "core/model/model_config.h"
#include "core/model/model_source.h"
#include "core/util/error.h"
#include "policy_test_util.h"

namespace remat {
namespace {

// test::tiny's Llama (4 blocks) with blocks 1 and 3 without RoPE.
ModelConfig with_nope(std::vector<int> pattern = {0, 1}) {
  ModelConfig m = test::tiny(Family::Llama, AttentionImpl::Naive);
  LayerKind nope{"nope"};
  nope.rope = false;
  m.layer_kinds = {LayerKind{"rope"}, nope};
  m.layer_pattern = std::move(pattern);
  m.validate();
  return m;
}

bool has_step(const BlockGraph& g, const std::string& name) {
  return std::any_of(g.steps().begin(), g.steps().end(), [&](const StepDef& s) { return s.name == name; });
}

TEST(NoRopeLayers, ABlockWithoutRopeHasATableWithoutTheRotaryStep) {
  const ModelConfig m = with_nope();
  const BlockGraph g(m);
  ASSERT_EQ(g.table_count(), 2);
  EXPECT_EQ(g.table_index(0), 0);
  EXPECT_EQ(g.table_index(1), 1);
  EXPECT_EQ(g.table_index(3), 1);
  const BlockGraph &rope = g.of(0), &nope = g.of(1);
  EXPECT_TRUE(has_step(rope, "attn.rope"));
  EXPECT_FALSE(has_step(nope, "attn.rope"));
  EXPECT_TRUE(rope.find("attn.qkv_raw").has_value());
  EXPECT_FALSE(nope.find("attn.qkv_raw").has_value());  // the projection makes attn.qkv itself
  // The same tensors are saved (RoPE's backward reads nothing); the FLOPs differ by the rotation.
  EXPECT_EQ(nope.saved_names(), rope.saved_names());
  EXPECT_EQ(nope.saved_bytes(), rope.saved_bytes());
  const auto rot = std::find_if(rope.steps().begin(), rope.steps().end(), [](const StepDef& s) { return s.op == OpKind::Rope; });
  ASSERT_NE(rot, rope.steps().end());
  EXPECT_EQ(g.flops_forward(1) + rot->flops_fwd, g.flops_forward(0));
  EXPECT_EQ(g.flops_backward(3) + rot->flops_bwd, g.flops_backward(2));
  // A model of one kind has one table.
  EXPECT_EQ(BlockGraph(test::tiny(Family::Llama, AttentionImpl::Naive)).table_count(), 1);
  EXPECT_EQ(BlockGraph(with_nope({0})).table_count(), 1);
}

TEST(NoRopeLayers, StageAndRankTablesFollowTheModelsBlocks) {
  const ModelConfig m = with_nope({0, 0, 0, 1});  // block 3 alone without RoPE
  ParallelLayout p;
  p.pp = 2;
  p.tp = 2;
  const BlockGraph first = per_rank_graph(m, p, 0), last = per_rank_graph(m, p, 1);  // blocks 0-1, 2-3
  EXPECT_EQ(first.table_index(1), 0);
  EXPECT_EQ(last.table_index(0), 0);
  EXPECT_EQ(last.table_index(1), 1);
  EXPECT_FALSE(has_step(last.of(1), "attn.rope"));
  // Each table is a rank's share: half the heads' Q|K|V on each of the two ranks.
  const BlockGraph whole(m);
  const int qkv_whole = *whole.of(3).find("attn.qkv"), qkv_rank = *last.of(1).find("attn.qkv");
  EXPECT_EQ(2 * last.of(1).tensors()[static_cast<std::size_t>(qkv_rank)].numel,
            whole.of(3).tensors()[static_cast<std::size_t>(qkv_whole)].numel);
}

TEST(NoRopeLayers, TrainExactlyUnderEveryPolicy) {
  const ModelConfig m = with_nope();
  const Trace none = test::run(m, test::plan("none", m));
  EXPECT_EQ(none.peak_bytes, none.predicted_peak_bytes);
  const std::uint64_t budget = simulate(m, test::plan("none", m), nullptr).activation_peak_bytes * 3 / 4;
  for (const char* policy : {"selective", "selective:modules=core_attn+mlp", "uniform:segments=2", "budget"}) {
    SCOPED_TRACE(policy);
    const Schedule s = test::plan(policy, m, std::string(policy) == "budget" ? std::optional<std::uint64_t>(budget) : std::nullopt);
    const Trace t = test::run(m, s);
    EXPECT_EQ(t.losses(), none.losses());
    EXPECT_EQ(t.grad_checksum, none.grad_checksum);
    EXPECT_EQ(t.peak_bytes, t.predicted_peak_bytes);
    EXPECT_LT(t.peak_bytes, none.peak_bytes);
  }
  // Without the rotation in blocks 1 and 3 the model is another one.
  const ModelConfig all = with_nope({0});
  const Trace a = test::run(all, test::plan("none", all));
  EXPECT_NE(a.losses().back(), none.losses().back());
  auto forward_flops = [](const Trace& t) {
    std::uint64_t f = 0;
    for (const auto& o : t.ops)
      if (o.phase == Phase::Forward) f += o.flops;
    return f;
  };
  EXPECT_LT(forward_flops(none), forward_flops(a));  // two blocks' rotations fewer
}

// Step costs measured in a run of a model whose every layer goes without RoPE: the first
// table's RoPE step, run by no block, has no records and costs nothing (it is never used).
TEST(NoRopeLayers, StepCostsOfARunWithoutAnyRotation) {
  const ModelConfig none_rotate = with_nope({1}), mixed = with_nope();
  const BlockGraph g(none_rotate);
  const auto rope = std::find_if(g.steps().begin(), g.steps().end(), [](const StepDef& s) { return s.op == OpKind::Rope; });
  ASSERT_NE(rope, g.steps().end());
  const std::size_t r = static_cast<std::size_t>(rope - g.steps().begin());
  const std::vector<double> c = measured_step_costs(test::run(none_rotate, test::plan("none", none_rotate)), g);
  EXPECT_EQ(c[r], 0.0);
  EXPECT_GT(c[0], 0.0);
  EXPECT_GT(measured_step_costs(test::run(mixed, test::plan("none", mixed)), BlockGraph(mixed))[r], 0.0);
  // Planned with them: the budget policy's plan of the model, checked by the registry.
  StepCosts sc{c, "ns"};
  const Schedule s = test::plugins().plan(parse_policy_choice("budget"), g,
                                          simulate(none_rotate, test::plan("none", none_rotate), nullptr).activation_peak_bytes, &sc);
  EXPECT_EQ(s.blocks, none_rotate.layers);
}

nlohmann::json smollm3() {
  std::ifstream in(std::string(REMAT_TEST_DATA_DIR) + "/hf-configs/smollm3-3b.json");
  return nlohmann::json::parse(in);
}

TEST(NoRopeLayers, SmolLM3sListOrItsIntervalGivesTheLayersWithout) {
  const ModelConfig m = model_from_hf_json(smollm3(), "smollm3");
  EXPECT_EQ(m.family, Family::SmolLM3);
  EXPECT_TRUE(m.tied_embeddings);  // the file has no tie_word_embeddings
  ASSERT_EQ(m.layer_kinds.size(), 2u);
  for (int l = 0; l < m.layers; ++l) EXPECT_EQ(m.rope_in(l), (l + 1) % 4 != 0) << l;
  nlohmann::json j = smollm3();
  j.erase("no_rope_layers");  // transformers' default: every no_rope_layer_interval-th layer
  EXPECT_EQ(model_from_hf_json(j, "x").layer_pattern, m.layer_pattern);
  j["no_rope_layer_interval"] = 3;
  const ModelConfig three = model_from_hf_json(j, "x");
  for (int l = 0; l < three.layers; ++l) EXPECT_EQ(three.rope_in(l), (l + 1) % 3 != 0) << l;
  // The preset is the published model at s = 4096: its layers' kinds as the import gives them.
  const ModelConfig preset = resolve_model("smollm3-3b");
  EXPECT_EQ(preset.layer_kinds, m.layer_kinds);
  for (int l = 0; l < m.layers; ++l) EXPECT_EQ(&preset.kind_of(l) - preset.layer_kinds.data(), &m.kind_of(l) - m.layer_kinds.data()) << l;
  j = smollm3();
  j["no_rope_layers"].push_back(0);  // longer than the layers: the first 36 count
  EXPECT_EQ(model_from_hf_json(j, "x").layer_pattern, m.layer_pattern);

  auto refusal = [](const nlohmann::json& bad) {
    try {
      model_from_hf_json(bad, "x");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  j = smollm3();
  j["no_rope_layers"].erase(0);
  EXPECT_NE(refusal(j).find("no_rope_layers: lists 35 layers; num_hidden_layers is 36"), std::string::npos) << refusal(j);
  j = smollm3();
  j["no_rope_layers"][3] = 2;
  EXPECT_NE(refusal(j).find("layer 3 is 2 (1: RoPE, 0: none)"), std::string::npos) << refusal(j);
  j = smollm3();
  j["no_rope_layers"] = nlohmann::json::array();  // transformers keeps it, and no layer finds its entry
  EXPECT_NE(refusal(j).find("no_rope_layers: must be a list of 1 (RoPE) or 0 (none) per layer, got []"), std::string::npos)
      << refusal(j);
  j = smollm3();  // truth values, as transformers reads them
  for (std::size_t l = 0; l < j["no_rope_layers"].size(); ++l)
    j["no_rope_layers"][l] = l % 2 ? nlohmann::json(j["no_rope_layers"][l] == 1) : nlohmann::json(j["no_rope_layers"][l].get<double>());
  EXPECT_EQ(model_from_hf_json(j, "x").layer_pattern, m.layer_pattern);
  j = smollm3();
  j["no_rope_layers"][0] = "yes";
  EXPECT_NE(refusal(j).find("layer 0 is \"yes\" (1: RoPE, 0: none)"), std::string::npos) << refusal(j);
  j = smollm3();  // a window listed while use_sliding_window is false: no layer slides
  j["sliding_window"] = 8;
  j["layer_types"][3] = "sliding_attention";
  EXPECT_NE(refusal(j).find("layer 3 is sliding_attention, but the config gives no window"), std::string::npos)
      << refusal(j);
  j = smollm3();
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  EXPECT_NE(refusal(j).find("use_sliding_window"), std::string::npos) << refusal(j);
}

}  // namespace
}  // namespace remat
