// The routing a run records (Trace::routing, routing.csv): per micro-batch, MoE layer and expert
// the choices routed there and those its capacity kept, from the first forward only; read back and
// checked; and the checks `plan --routing-from` makes of a recorded routing against a model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/analysis/routing_load.h"
#include "core/io/safetensors.h"
#include "core/model/param_layout.h"
#include "core/trace/run_dir.h"
#include "policy_test_util.h"
#include "test_files.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

using testing::TempDir;

// 2 layers (block 1 dense), 4 experts, top-2, 16 tokens, a router with a bias.
ModelConfig biased_router_model(double capacity) {
  ModelConfig m = test::tiny(Family::Qwen3Moe, AttentionImpl::Naive, 2);
  m.seq = 8;
  m.batch = 2;
  m.moe = MoeConfig{4, 2, 32, true, capacity};
  m.moe.router_bias = true;
  m.validate();
  return m;
}

// One counted step from weights that are all zero but the router's bias: every token's logits are
// the bias, so every token chooses the experts of the two highest biases (1 and 3).
Trace run_from_bias(const ModelConfig& m, const std::string& policy, const fs::path& dir) {
  const ParamLayout L(m);
  std::vector<float> flat(static_cast<std::size_t>(L.total()), 0.0f);
  const std::int64_t at = L.offset(0, "mlp.router.b");
  EXPECT_GE(at, 0);
  const float bias[4] = {0.1f, 0.9f, 0.5f, 0.7f};
  for (int e = 0; e < 4; ++e) flat[static_cast<std::size_t>(at + e)] = bias[e];
  const std::string w = (dir / (policy + ".safetensors")).string();
  write_flat_safetensors(w, flat, L);
  return test::run(m, test::plan(policy, m), 1, 0, 7, w);
}

std::vector<std::uint64_t> column(const Trace& t, bool kept) {
  std::vector<std::uint64_t> v;
  for (const auto& r : t.routing) v.push_back(kept ? r.kept : r.routed);
  return v;
}

TEST(MoeRouting, ARouterThatSendsEveryTokenToTwoExpertsIsRecordedSo) {
  TempDir d;
  // Dropless: all 16 tokens on experts 1 and 3; a capacity factor of 1 keeps 16·2/4 = 8 of them.
  for (double c : {0.0, 1.0}) {
    SCOPED_TRACE(c);
    const ModelConfig m = biased_router_model(c);
    const Trace t = run_from_bias(m, "none", d.path());
    ASSERT_EQ(t.routing.size(), 4u);  // block 0's four experts; block 1 is dense
    for (int e = 0; e < 4; ++e) {
      EXPECT_EQ(t.routing[e].layer, 0);
      EXPECT_EQ(t.routing[e].micro_batch, 0);
      EXPECT_EQ(t.routing[e].expert, e);
    }
    EXPECT_EQ(column(t, false), (std::vector<std::uint64_t>{0, 16, 0, 16}));
    EXPECT_EQ(column(t, true), c > 0 ? (std::vector<std::uint64_t>{0, 8, 0, 8}) : column(t, false));
    const auto loads = layer_loads(t.routing, 4);
    ASSERT_EQ(loads.size(), 1u);
    EXPECT_EQ(loads[0].busiest, 1);
    EXPECT_EQ(loads[0].most, 16u);
    EXPECT_EQ(loads[0].imbalance, 2.0);  // experts / top_k: the most uneven a top-2 router can be
    EXPECT_EQ(max_moe_imbalance(m.moe), 2.0);
    // A policy that rebuilds the layer routes again inside the backward: recorded once still.
    const Trace r = run_from_bias(m, "selective:modules=moe", d.path());
    EXPECT_EQ(r.routing, t.routing);
    EXPECT_GT(r.flops.recompute, 0u);
  }
}

// From random weights: uneven routing, the same under every policy, every layer's choices adding
// up to tokens · top_k, and read back from the run directory as written.
TEST(MoeRouting, RandomRoutingIsUnevenTheSameUnderEveryPolicyAndReadsBack) {
  ModelConfig m = test::tiny(Family::Mixtral, AttentionImpl::Naive, 3);
  m.seq = 16;
  m.validate();
  const Trace none = test::run(m, test::plan("none", m), 1, 1);
  ASSERT_EQ(none.routing.size(), 3u * 4u);
  double most = 0.0;
  for (const auto& l : layer_loads(none.routing, 4)) {
    EXPECT_EQ(l.routed, static_cast<std::uint64_t>(m.tokens() * 2));
    EXPECT_EQ(l.kept, l.routed);  // dropless
    most = std::max(most, l.imbalance);
  }
  EXPECT_GT(most, 1.0);
  for (const char* policy : {"uniform:segments=1", "selective:modules=moe_act"}) {
    SCOPED_TRACE(policy);
    EXPECT_EQ(test::run(m, test::plan(policy, m), 1, 1).routing, none.routing);
  }
  TempDir d;
  const std::string dir = (d.path() / "run").string();
  write_run_dir(none, dir, false);
  EXPECT_EQ(read_run_dir(dir).routing, none.routing);

  // Edited rows are refused by name.
  const fs::path file = fs::path(dir) / "routing.csv";
  const std::string good = testing::slurp(file.string());
  auto refusal = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const std::size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    s.replace(at, from.size(), to);
    testing::spit(file, s);
    try {
      read_run_dir(dir);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const RoutingRecord& r0 = none.routing[0];
  const std::string row0 = "0,0,0," + std::to_string(r0.routed) + "," + std::to_string(r0.kept);
  EXPECT_NE(refusal(row0, "0,0,0," + std::to_string(r0.routed + 1) + "," + std::to_string(r0.routed + 1))
                .find("routed " + std::to_string(m.tokens() * 2 + 1) + " choices"),
            std::string::npos);
  EXPECT_NE(refusal(row0, "0,0,0," + std::to_string(r0.routed) + "," + std::to_string(r0.routed + 1)).find("kept of"),
            std::string::npos);
  EXPECT_NE(refusal(row0, "0,0,7," + std::to_string(r0.routed) + "," + std::to_string(r0.kept)).find("experts"),
            std::string::npos);
  EXPECT_NE(refusal(row0, "1,0,0," + std::to_string(r0.routed) + "," + std::to_string(r0.kept)).find("micro-batches"),
            std::string::npos);
}

TEST(MoeRouting, ARecordedRoutingIsRefusedForAnotherModelNamingTheField) {
  const ModelConfig m = test::tiny(Family::Mixtral, AttentionImpl::Naive, 3);
  auto refusal = [&](const ModelConfig& other) {
    try {
      check_routing_model(m, other, "--routing-from R");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(refusal(m), "no error");
  ModelConfig x = m;
  x.moe.experts = 8;
  EXPECT_NE(refusal(x).find("experts 4, the model has 8"), std::string::npos) << refusal(x);
  x = m, x.moe.top_k = 1;
  EXPECT_NE(refusal(x).find("top_k 2, the model has 1"), std::string::npos) << refusal(x);
  x = m, x.moe.capacity_factor = 1.25;
  EXPECT_NE(refusal(x).find("capacity_factor none (dropless)"), std::string::npos) << refusal(x);
  x = m, x.layers = 4;
  EXPECT_NE(refusal(x).find("layers 3, the model has 4"), std::string::npos) << refusal(x);
  x = m, x.seq *= 2;
  EXPECT_NE(refusal(x).find("tokens per micro-batch"), std::string::npos) << refusal(x);
  x = test::tiny(Family::Llama, AttentionImpl::Naive, 3);
  EXPECT_NE(refusal(x).find("has no experts"), std::string::npos) << refusal(x);
  // A run that recorded nothing to replay.
  auto unrecorded = [&](const ModelConfig& rec, std::size_t rows, int version) {
    try {
      check_routing_recorded(rec, rows, version, "R");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(unrecorded(m, 12, kTraceFormatVersion), "no error");
  EXPECT_NE(unrecorded(m, 12, 5).find("format version 5 records no routing"), std::string::npos);
  EXPECT_NE(unrecorded(x, 0, kTraceFormatVersion).find("has no experts"), std::string::npos);
  EXPECT_NE(unrecorded(m, 0, kTraceFormatVersion).find("no rows"), std::string::npos);
}

}  // namespace
}  // namespace remat
