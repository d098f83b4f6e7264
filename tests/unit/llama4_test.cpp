// Llama 4 (Family::Llama4): Scout's published config.json (model_type llama4, the text model in
// text_config) read as the preset, Llama4TextConfig's defaults and refusals, and the features on
// a small model: RoPE in the complex form, the weightless L2 QK-norm on the layers with RoPE,
// chunked attention, temperature tuning on the layers without RoPE, and the top-1 sigmoid router
// whose weight multiplies the expert's input. Each changes the step; none breaks the prediction. The
// published checkpoints' names: the text model under "language_model.", the vision tower skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/graph/block_graph.h"
#include "core/io/safetensors.h"
#include "core/io/weight_files.h"
#include "core/model/model_config.h"
#include "core/model/model_source.h"
#include "core/model/param_layout.h"
#include "core/util/attn_temperature.h"
#include "core/util/error.h"
#include "hf_test_util.h"
#include "cpu_test_util.h"
#include "engine_test_util.h"
#include "policy_test_util.h"
#include "test_files.h"

namespace remat {
namespace {

nlohmann::json scout_published() { return hftest::published("llama-4-scout-17b-16e.json"); }

using hftest::refusal;

// Scout's text model at small sizes; every other field as published.
nlohmann::json small_text() {
  nlohmann::json t = scout_published().at("text_config");
  t["hidden_size"] = 64;
  t["intermediate_size"] = 32;
  t["intermediate_size_mlp"] = 48;
  t["num_hidden_layers"] = 8;
  t["num_attention_heads"] = 4;
  t["num_key_value_heads"] = 2;
  t["head_dim"] = 16;
  t["vocab_size"] = 128;
  t["num_local_experts"] = 4;
  t["moe_layers"] = {1, 3, 5, 7};
  t["no_rope_layers"] = {1, 1, 1, 0, 1, 1, 1, 0};
  return t;
}

TEST(Llama4, ScoutsPublishedConfigIsThePresetAtItsOwnLength) {
  ModelConfig file = model_from_hf_json(scout_published(), "llama-4-scout");
  EXPECT_EQ(file.family, Family::Llama4);
  EXPECT_TRUE(file.rope_interleaved);
  EXPECT_EQ(file.qk_norm, QkNormKind::HeadL2);
  EXPECT_FALSE(file.tied_embeddings || file.qkv_bias || file.out_bias);
  EXPECT_EQ(file.ffn, 16384);  // intermediate_size_mlp (no dense layer here)
  EXPECT_EQ(file.moe.ffn, 8192);
  EXPECT_EQ(file.moe.shared_ffn, 8192);
  EXPECT_TRUE(file.moe.sigmoid && file.moe.weight_input && !file.moe.norm_topk);
  EXPECT_EQ(file.moe.top_k, 1);
  EXPECT_EQ(file.attn_temperature_floor, 8192);
  EXPECT_EQ(file.attn_temperature_scale, 0.1);
  for (int l : {0, 1, 2, 44}) {
    EXPECT_EQ(file.chunk_of(l), 8192) << l;
    EXPECT_TRUE(file.rope_in(l)) << l;
  }
  for (int l : {3, 47}) {
    EXPECT_EQ(file.chunk_of(l), 0) << l;
    EXPECT_FALSE(file.rope_in(l)) << l;
  }
  for (int l = 0; l < 48; ++l) EXPECT_TRUE(file.moe_in(l)) << l;
  // The vision tower, the image tokens and the fields the causal LM never reads are listed.
  for (const char* k : {"vision_config", "image_token_index", "output_router_logits", "router_aux_loss_coef",
                        "router_jitter_noise", "for_llm_compressor"})
    EXPECT_NE(std::find(file.ignored_fields.begin(), file.ignored_fields.end(), k), file.ignored_fields.end()) << k;
  const ModelConfig preset = resolve_model("llama-4-scout");
  EXPECT_EQ(hftest::at_preset_settings(file, preset), model_to_json(preset));
  // The Hub's 108,641,793,536 less the vision tower's 871,932,416 (tests/data/hf-configs/README.md).
  EXPECT_EQ(ParamLayout(preset).total(), 107'769'861'120);
  // The text config alone (model_type llama4_text) is the same model.
  EXPECT_EQ(model_to_json(model_from_hf_json(scout_published().at("text_config"), "llama-4-scout")),
            model_to_json(model_from_hf_json(scout_published(), "llama-4-scout")));
}

TEST(Llama4, TensorsHaveHuggingFacesNamesAndTheL2NormNone) {
  const ModelConfig m = model_from_hf_json(small_text(), "small");
  const ParamLayout p(m);
  for (const char* n : {"model.layers.0.feed_forward.gate_proj.weight", "model.layers.0.feed_forward.down_proj.weight",
                        "model.layers.1.feed_forward.router.weight", "model.layers.1.feed_forward.experts.gate_up_proj",
                        "model.layers.1.feed_forward.experts.down_proj",
                        "model.layers.1.feed_forward.shared_expert.down_proj.weight", "lm_head.weight"})
    EXPECT_NE(p.find(n), nullptr) << n;
  EXPECT_EQ(p.find("model.layers.0.self_attn.q_norm.weight"), nullptr);
  // Dense layers 0, 2, ... have intermediate_size_mlp; the experts intermediate_size.
  EXPECT_EQ(p.numel(0, "mlp.fc2.w"), 64 * 48);
  EXPECT_EQ(p.numel(1, "mlp.experts.fc2.w"), 4 * 64 * 32);
  // The L2 norm runs on the layers with RoPE only; temperature on those without.
  const BlockGraph g(m);
  auto has = [&](int b, const char* step) {
    const auto& steps = g.of(b).steps();
    return std::any_of(steps.begin(), steps.end(), [&](const StepDef& s) { return s.name == step; });
  };
  EXPECT_TRUE(has(0, "attn.qk_norm") && has(0, "attn.rope") && !has(0, "attn.temperature"));
  EXPECT_TRUE(!has(3, "attn.qk_norm") && !has(3, "attn.rope") && has(3, "attn.temperature"));
}

TEST(Llama4, AbsentFieldsTakeLlama4TextConfigsDefaults) {
  const ModelConfig d = model_from_hf_json({{"model_type", "llama4_text"}}, "d");
  EXPECT_EQ(d.layers, 48);
  EXPECT_EQ(d.hidden, 5120);
  EXPECT_EQ(d.head_dim(), 128);
  EXPECT_EQ(d.moe.experts, 16);
  EXPECT_EQ(d.ffn, 16384);
  EXPECT_EQ(d.rope_theta, 500000.0);
  EXPECT_EQ(d.chunk_of(0), 8192);
  EXPECT_FALSE(d.rope_in(3));  // no_rope_layer_interval 4
  EXPECT_EQ(d.attn_temperature_floor, 8192);
  // interleave_moe_layer_step 2: layers 1, 3, ... sparse; use_qk_norm false: no norm;
  // attention_chunk_size null with every layer full: no chunks; attn_temperature_tuning false: none.
  nlohmann::json j = small_text();
  j.erase("moe_layers");
  j["interleave_moe_layer_step"] = 2;
  j["use_qk_norm"] = false;
  j["attention_chunk_size"] = nullptr;
  j["layer_types"] = std::vector<std::string>(8, "full_attention");
  j["attn_temperature_tuning"] = false;
  const ModelConfig m = model_from_hf_json(j, "m");
  EXPECT_TRUE(!m.moe_in(0) && m.moe_in(1) && !m.moe_in(2) && m.moe_in(7));
  EXPECT_EQ(m.qk_norm, QkNormKind::None);
  EXPECT_EQ(m.chunk_of(0), 0);
  EXPECT_EQ(m.attn_temperature_floor, 0);
  // layer_types chooses the chunked layers.
  nlohmann::json t = small_text();
  t["layer_types"] = nlohmann::json::array();
  for (int l = 0; l < 8; ++l) t["layer_types"].push_back(l == 5 ? "chunked_attention" : "full_attention");
  const ModelConfig c = model_from_hf_json(t, "c");
  EXPECT_EQ(c.chunk_of(5), 8192);
  EXPECT_EQ(c.chunk_of(0), 0);
  // moe_layers empty: every layer dense.
  nlohmann::json none = small_text();
  none["moe_layers"] = nlohmann::json::array();
  EXPECT_FALSE(model_from_hf_json(none, "n").moe.on());
}

TEST(Llama4, BadFieldsAreRefusedByNameBeforeAnythingRuns) {
  auto says = [](nlohmann::json j, const char* field, const char* words) {
    const std::string w = refusal(j);
    EXPECT_NE(w.find(field), std::string::npos) << w;
    EXPECT_NE(w.find(words), std::string::npos) << w;
  };
  nlohmann::json j = small_text();
  j["num_experts_per_tok"] = 5;
  says(j, "num_experts_per_tok", "more than the 4 experts");
  j = small_text();
  j["moe_layers"] = {1, 9};
  says(j, "moe_layers", "9 is not a layer index below num_hidden_layers 8");
  j = small_text();
  j["layer_types"] = {"sliding_attention"};
  says(j, "layer_types", "one kind per layer");
  j = small_text();
  j["no_rope_layers"] = {1, 2};
  says(j, "no_rope_layers", "lists 2 layers");
  j = small_text();
  j["attention_chunk_size"] = nullptr;
  says(j, "attention_chunk_size", "transformers fails there");
  nlohmann::json outer = scout_published();
  outer.erase("text_config");
  says(outer, "text_config", "give text_config");
}

// Our JSON's keys for these features: read back as written, refused by name where they make no sense.
TEST(Llama4, OurJsonKeysRoundTripAndAreCheckedByName) {
  const ModelConfig m = test::tiny(Family::Llama4, AttentionImpl::Naive);
  const nlohmann::json j = model_to_json(m);
  EXPECT_EQ(j.at("moe").at("weights_on"), "input");
  EXPECT_EQ(model_to_json(model_from_json(j)), j);
  auto refused = [&](const char* key, const nlohmann::json& v, const char* words) {
    nlohmann::json bad = j;
    if (std::string(key) == "moe.weights_on") bad["moe"]["weights_on"] = v;
    else bad[key] = v;
    try {
      model_from_json(bad);
      ADD_FAILURE() << key << " " << v << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused("moe.weights_on", "sideways", "must be \"output\" or \"input\"");
  refused("attn_temperature_floor", -1, "attn_temperature_floor");
  refused("attn_temperature_scale", 1e9, "attn_temperature_scale");
  refused("qk_norm", "l2", "qk_norm");
  nlohmann::json learned = j;
  learned["position"] = "learned";
  learned.erase("layer_kinds");
  learned.erase("layer_pattern");
  learned.erase("attn_temperature_floor");
  learned.erase("attn_temperature_scale");
  learned["qk_norm"] = "none";
  try {
    model_from_json(learned);
    ADD_FAILURE() << "rope_interleaved without RoPE accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("rope_interleaved"), std::string::npos) << e.what();
  }
}

// The permute whose rows are the token times its weight: its backward's dx and dweights against
// finite differences of sum(R · rows) (bilinear in x and w, so the differences are exact but for
// rounding), dropless and with a capacity that drops choices; the unpermute then sums unweighted.
TEST(Llama4, WeightedPermuteBackwardMatchesFiniteDifferences) {
  for (std::int64_t capacity : {0, 2}) {
    SCOPED_TRACE(capacity);
    cputest::Env e;
    MoeDims m;
    m.experts = 4, m.top_k = 2, m.tokens = 6, m.capacity = capacity, m.sigmoid = true, m.weight_input = true;
    const int H = 5;
    const std::int64_t n = m.tokens * m.top_k, R = m.rows();
    Tensor logits = e.from(cputest::randv(static_cast<std::size_t>(m.tokens * m.experts), 7, -2, 2));
    Tensor w = e.make(DType::F32, n), routing = e.make(DType::I32, 2 * n + 2 * m.experts);
    OpArgs a;
    a.moe = m, a.in[0] = &logits, a.out[0] = &w, a.out[1] = &routing, a.M = m.tokens, a.K = m.top_k, a.N = m.experts;
    e.be.run(OpKind::MoeRoute, Pass::Forward, a);
    std::vector<float> x = cputest::randv(static_cast<std::size_t>(m.tokens * H), 8), wv = e.get(w);
    const std::vector<float> rw = cputest::randv(static_cast<std::size_t>(R * H), 9);
    auto loss = [&](const std::vector<float>& xs, const std::vector<float>& ws) {
      Tensor tx = e.from(xs), tw = e.from(ws), xp = e.make(DType::F32, R * H);
      OpArgs p;
      p.moe = m, p.in[0] = &tx, p.in[1] = &routing, p.in[2] = &tw, p.out[0] = &xp, p.K = H;
      e.be.run(OpKind::MoePermute, Pass::Forward, p);
      return cputest::dotd(e.get(xp), rw);
    };
    Tensor tx = e.from(x), tw = e.from(wv), dout = e.from(rw), dx = e.make(DType::F32, m.tokens * H),
           dw = e.make(DType::F32, n);
    OpArgs b;
    b.moe = m, b.in[0] = &tx, b.in[1] = &routing, b.in[2] = &tw, b.dout[0] = &dout, b.din[0] = &dx, b.din[2] = &dw, b.K = H;
    e.be.run(OpKind::MoePermute, Pass::Backward, b);
    const std::vector<float> gx = e.get(dx), gw = e.get(dw);
    const float h = 1e-2f;
    for (std::size_t i = 0; i < x.size(); ++i) {
      std::vector<float> up = x, dn = x;
      up[i] += h, dn[i] -= h;
      EXPECT_NEAR(gx[i], (loss(up, wv) - loss(dn, wv)) / (2 * h), 1e-4) << "dx " << i;
    }
    double dropped = 0;
    for (std::size_t i = 0; i < wv.size(); ++i) {
      std::vector<float> up = wv, dn = wv;
      up[i] += h, dn[i] -= h;
      const double fd = (loss(x, up) - loss(x, dn)) / (2 * h);
      EXPECT_NEAR(gw[i], fd, 1e-4) << "dweights " << i;
      dropped += fd == 0.0 ? 1 : 0;
    }
    if (capacity > 0) {
      EXPECT_GT(dropped, 0) << "no choice was dropped";
    }
  }
}

TEST(Llama4, TheTemperatureIsOneBelowTheFloorThenGrowsWithTheLog) {
  for (int s = 0; s < 8191; ++s) ASSERT_EQ(attn_temperature(s, 8192, 0.1f), 1.0f) << s;
  EXPECT_NEAR(attn_temperature(8191, 8192, 0.1f), 1.0 + 0.1 * std::log(2.0), 1e-6);
  EXPECT_NEAR(attn_temperature(15, 4, 0.5f), 1.0 + 0.5 * std::log(5.0), 1e-6);
}

// Each feature changes the step (a run without it differs), and with all of them every policy
// keeps the bits of `none` and the peak its prediction (the PolicyEquivalence cases run more).
TEST(Llama4, EachFeatureChangesTheStepAndThePeakIsPredicted) {
  const ModelConfig m = test::tiny(Family::Llama4, AttentionImpl::Flash, 0.0, 4);
  const Trace base = test::run(m, test::plan_here("none", m));
  EXPECT_EQ(base.peak_bytes, base.predicted_peak_bytes);
  auto differs = [&](const char* what, ModelConfig v) {
    v.validate();
    const Trace t = test::run(v, test::plan_here("none", v));
    EXPECT_NE(t.losses().back(), base.losses().back()) << what;
    EXPECT_EQ(t.peak_bytes, t.predicted_peak_bytes) << what;
  };
  ModelConfig v = m;
  v.rope_interleaved = false;
  differs("rotate-half pairs", v);
  v = m;
  v.qk_norm = QkNormKind::None;
  differs("no L2 norm", v);
  v = m;
  v.attn_temperature_floor = 0;
  differs("no temperature", v);
  v = m;
  v.moe.weight_input = false;
  differs("weights on the output", v);
  v = m;
  for (LayerKind& k : v.layer_kinds) k.chunk = 0;
  differs("no chunks", v);
  for (const char* policy : {"block", "selective"}) {
    const Trace p = test::run(m, test::plan_here(policy, m));
    EXPECT_EQ(p.losses(), base.losses()) << policy;
    EXPECT_EQ(p.grad_checksum, base.grad_checksum) << policy;
    EXPECT_EQ(p.peak_bytes, p.predicted_peak_bytes) << policy;
  }
}


// Llama 4's published checkpoints (Llama4ForConditionalGeneration) hold the text model under
// "language_model." beside the vision tower; a text step reads the one and skips the other.
TEST(Llama4, MultimodalCheckpointsLoadTheirTextModel) {
  const ModelConfig m = model_from_hf_json(small_text(), "small");
  const ParamLayout L(m);
  std::vector<float> flat(static_cast<std::size_t>(L.total()));
  for (std::size_t i = 0; i < flat.size(); ++i) flat[i] = 0.001f * static_cast<float>(i % 1009) - 0.5f;
  std::map<std::string, SafeTensor> text, multimodal, vision;
  for (auto& [name, t] : hf_tensors(flat, L)) {
    text.emplace(name, t);
    multimodal.emplace("language_model." + name, t);
  }
  ASSERT_EQ(multimodal.count("language_model.model.layers.1.feed_forward.experts.gate_up_proj"), 1u);
  ASSERT_EQ(multimodal.count("language_model.lm_head.weight"), 1u);
  vision.emplace("vision_model.patch_embedding.linear.weight", SafeTensor{"F32", {4, 6}, std::vector<float>(24, 1.0f)});
  vision.emplace("multi_modal_projector.linear_1.weight", SafeTensor{"F32", {2, 3}, std::vector<float>(6, 2.0f)});

  testing::TempDir d;
  // One file: the text model under its prefix and the vision tower beside it.
  std::map<std::string, SafeTensor> one = multimodal;
  one.insert(vision.begin(), vision.end());
  write_safetensors(d / "one.safetensors", one);
  EXPECT_EQ(weight_values(open_weight_files(d / "one.safetensors"), L, m.family), flat);
  // Shards under an index, the vision tower in a shard of its own, as the Hub's are laid out.
  std::filesystem::create_directories(d / "shards");
  write_safetensors(d / "shards/model-00001-of-00002.safetensors", multimodal);
  write_safetensors(d / "shards/model-00002-of-00002.safetensors", vision);
  nlohmann::json index;
  for (const auto& [name, t] : multimodal) index["weight_map"][name] = "model-00001-of-00002.safetensors";
  for (const auto& [name, t] : vision) index["weight_map"][name] = "model-00002-of-00002.safetensors";
  testing::spit(d / "shards/model.safetensors.index.json", index.dump());
  const WeightFiles opened = open_weight_files(d / "shards");
  // The vision shard is read for its header alone: cut short after that, the load still works.
  std::filesystem::resize_file(d / "shards/model-00002-of-00002.safetensors",
                               std::filesystem::file_size(d / "shards/model-00002-of-00002.safetensors") - 8);
  EXPECT_EQ(weight_values(opened, L, m.family), flat);
  // The text model's own names (Llama4ForCausalLM) read the same.
  EXPECT_EQ(flat_from_hf(text, L, m.family, std::string("text only")), flat);

  // A tensor under both names is refused naming both; a wrong shape names the file's tensor.
  std::map<std::string, SafeTensor> both = multimodal;
  both.emplace("model.norm.weight", text.at("model.norm.weight"));
  EXPECT_NE(testing::message_of([&] { flat_from_hf(both, L, m.family, std::string("f")); })
                .find("tensors 'language_model.model.norm.weight' and 'model.norm.weight' are both the model's "
                      "'model.norm.weight'"),
            std::string::npos);
  std::map<std::string, SafeTensor> bad = multimodal;
  bad.at("language_model.model.norm.weight").shape = {2, 32};
  EXPECT_NE(testing::message_of([&] { flat_from_hf(bad, L, m.family, std::string("f")); })
                .find("tensor 'language_model.model.norm.weight' has shape 2x32, expected 64"),
            std::string::npos);
  // Only Llama 4's checkpoints carry a vision tower: another family refuses it.
  ModelConfig llama = testing::small_model(Family::Llama, AttentionImpl::Naive, 0.0, DType::F32);
  const ParamLayout LL(llama);
  std::map<std::string, SafeTensor> with_vision;
  for (auto& [name, t] : hf_tensors(std::vector<float>(static_cast<std::size_t>(LL.total()), 0.5f), LL))
    with_vision.emplace(name, t);
  with_vision.insert(vision.begin(), vision.end());
  EXPECT_NE(testing::message_of([&] { flat_from_hf(with_vision, LL, llama.family, std::string("f")); })
                .find("is not part of this model"),
            std::string::npos);
}

}  // namespace
}  // namespace remat
