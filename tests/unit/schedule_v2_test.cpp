// Schedule format version 2: a backward that rebuilds named tensors inside itself, just before
// the backward step that reads them, and offloads and prefetches of named tensors. Their rules
// (ScheduleState), their files (version 1 still read, a version 2 action in a version 1 file
// refused with its index), and real runs bitwise equal to `none` with peak = predicted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/graph/block_graph.h"
#include "core/schedule/block_state.h"
#include "core/schedule/validator.h"
#include "policy_test_util.h"

namespace remat {
namespace {

using test::run;
using test::tiny;
using Names = std::vector<std::string>;

std::string reason(const Schedule& s, const BlockGraph& g, std::size_t* index = nullptr) {
  try {
    validate_schedule(s, g);
  } catch (const ScheduleError& e) {
    if (index) *index = e.index();
    return e.what();
  }
  return "";
}

// Every block keeps its saved set without `drop` and rebuilds `drop` inside its backward.
Schedule inside(int L, const Names& keep, const Names& drop) {
  Schedule s;
  s.blocks = L;
  for (int b = 0; b < L; ++b) s.forward(b, Keep::named(keep));
  for (int b = L - 1; b >= 0; --b) s.backward(b, Keep::named(drop));
  return s;
}

Names saved_without(const BlockGraph& g, const Names& drop) {
  Names keep;
  for (const std::string& n : g.saved_names())
    if (std::find(drop.begin(), drop.end(), n) == drop.end()) keep.push_back(n);
  return keep;
}

TEST(ScheduleV2, RebuildsEachModuleJustBeforeItsBackward) {
  const ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  const BlockGraph g(m);
  const Names drop = g.module_tensors({"core_attn", "mlp"});
  const Schedule s = inside(2, saved_without(g, drop), drop);
  const ScheduleStats st = validate_schedule(s, g);
  // The attention core's three and the MLP's two, each set once per block, the MLP's first.
  ScheduleState state(g, s);
  for (std::size_t i = 0; i < 2; ++i) state.apply(i, s.actions[i]);
  const ActionEffect e = state.apply(2, s.actions[2]);
  ASSERT_EQ(e.inner.size(), 2u);
  EXPECT_EQ(g.steps()[static_cast<std::size_t>(e.inner[0].before_step)].name, "mlp.fc2");
  EXPECT_EQ(g.steps()[static_cast<std::size_t>(e.inner[1].before_step)].name, "attn.pv");
  EXPECT_TRUE(e.inner[1].targets.has(*g.find("attn.probs")));  // made with attn.drop_out, kept for the softmax
  std::uint64_t flops = 0;
  for (const InnerRecompute& r : e.inner) flops += r.flops;
  EXPECT_EQ(st.flops_recompute, 2 * flops);
  EXPECT_EQ(st.block_forwards, 2u);  // rebuilding inside is no block forward
}

TEST(ScheduleV2, RunsBitwiseAndHoldsLessThanRebuildingBeforeTheBackward) {
  const ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 3);
  const BlockGraph g(m);
  const Trace base = run(m, test::plan("none", m), 1, 0);
  for (const Names& mods : {Names{"core_attn"}, Names{"mlp"}, Names{"layernorm"}, Names{"core_attn", "mlp", "layernorm"}}) {
    const Names drop = g.module_tensors(mods);
    SCOPED_TRACE(drop.front());
    const Trace t = run(m, inside(3, saved_without(g, drop), drop), 1, 0);
    EXPECT_EQ(t.losses(), base.losses());
    EXPECT_EQ(t.grad_checksum, base.grad_checksum);
    EXPECT_EQ(t.peak_bytes, t.predicted_peak_bytes);
    for (std::uint64_t b : t.saved_bytes_per_block) EXPECT_EQ(b, g.saved_bytes_without(drop));
    std::uint64_t rebuilt = 0;
    for (const LedgerEntry& l : t.ledger)
      if (l.decision == "recomputed") rebuilt += l.bytes;
    EXPECT_EQ(rebuilt, 3 * (g.saved_bytes() - g.saved_bytes_without(drop)));
    if (mods.size() > 1) continue;
    // Rebuilt after the backward of every step above the module's, before the module's own.
    // (first step rebuilt, the step whose backward comes just before, the first reader's)
    const char* const order[3][3] = {{"attn.softmax", "attn.proj", "attn.pv"},
                                     {"mlp.fc", "mlp.residual", "mlp.fc2"},
                                     {"ln2", "mlp.gelu", "mlp.fc"}};
    const auto& o = order[mods[0] == "core_attn" ? 0 : mods[0] == "mlp" ? 1 : 2];
    std::size_t made = 0, above = 0, reader = 0;
    for (std::size_t i = 0; i < t.ops.size(); ++i) {
      if (t.ops[i].name == std::string("h2.") + o[0] && t.ops[i].phase == Phase::Recompute && !made) made = i;
      if (t.ops[i].name == std::string("h2.") + o[1] + ".backward") above = i;
      if (t.ops[i].name == std::string("h2.") + o[2] + ".backward") reader = i;
    }
    EXPECT_GT(made, above) << o[0] << " rebuilt at op " << made << ", " << o[1] << "'s backward at " << above;
    EXPECT_LT(made, reader) << o[0] << " rebuilt at op " << made << ", " << o[2] << "'s backward at " << reader;
    EXPECT_GT(above, 0u);
  }
  // The attention core and the MLP rebuilt before the block's backward live through all of it;
  // inside, the MLP's are gone before the attention core's are made.
  const Names drop = g.module_tensors({"core_attn", "mlp"});
  std::string list;
  for (const auto& n : drop) list += (list.empty() ? "" : "+") + n;
  const Prediction before = simulate(g, test::plan("selective:recompute=" + list, m), nullptr);
  const Prediction in = simulate(g, test::plan("selective:modules=core_attn+mlp", m), nullptr);
  EXPECT_LT(in.activation_peak_bytes, before.activation_peak_bytes);
  EXPECT_EQ(in.plan.flops_recompute, before.plan.flops_recompute);  // the same steps rerun
}

TEST(ScheduleV2, RefusesWhatCannotBeRebuiltOrMoved) {
  const ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  const BlockGraph g(m);
  const Names all = g.saved_names();
  std::size_t at = 0;
  // A tensor the block still holds.
  Schedule s = inside(2, all, {"attn.probs"});
  EXPECT_NE(reason(s, g, &at).find("block 1 still holds 'attn.probs' (module core_attn)"), std::string::npos)
      << reason(s, g);
  EXPECT_EQ(at, 2u);
  // The block input, and a tensor the block does not save.
  s = inside(2, saved_without(g, {"block.in"}), {"block.in"});
  EXPECT_NE(reason(s, g).find("the input of block 1 cannot be rebuilt inside its backward"), std::string::npos);
  s = inside(2, all, {"attn.proj_out"});
  EXPECT_NE(reason(s, g).find("'attn.proj_out' is not a saved tensor of the block"), std::string::npos);
  // Dropped but not named: the backward lacks it.
  s = inside(2, saved_without(g, {"attn.probs", "mlp.gelu_in"}), {"attn.probs"});
  EXPECT_NE(reason(s, g).find("needs 'mlp.gelu_in'"), std::string::npos);
  // Offloads and prefetches of named tensors.
  s = Schedule{};
  s.blocks = 2;
  s.forward(0);
  s.offload(0, Keep::named({"mlp.gelu_in"}));
  s.offload(0, Keep::named({"mlp.gelu_in"}));
  EXPECT_NE(reason(s, g, &at).find("'mlp.gelu_in' (module mlp) of block 0 is already offloaded"), std::string::npos)
      << reason(s, g);
  EXPECT_EQ(at, 2u);
  s.actions.pop_back();
  s.prefetch(0, Keep::named({"ln1.out"}));
  EXPECT_NE(reason(s, g).find("'ln1.out' (module layernorm) of block 0 is on the device already"), std::string::npos)
      << reason(s, g);
  s.actions.pop_back();
  s.forward(1);
  s.backward(1);
  s.backward(0);
  EXPECT_NE(reason(s, g).find("'mlp.gelu_in', which is on the host (prefetch it first)"), std::string::npos);
}

TEST(ScheduleV2, OffloadsAndPrefetchesNamedTensors) {
  const ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  const BlockGraph g(m);
  Schedule s;
  s.blocks = 2;
  const Keep big = Keep::named({"attn.probs", "attn.drop_out"});
  s.forward(0);
  s.offload(0, big);
  s.forward(1);
  s.backward(1);
  s.prefetch(0, big);
  s.backward(0);
  const Trace base = run(m, test::plan("none", m), 1, 0);
  const Trace t = run(m, s, 1, 0);
  EXPECT_EQ(t.losses(), base.losses());
  EXPECT_EQ(t.grad_checksum, base.grad_checksum);
  EXPECT_EQ(t.peak_bytes, t.predicted_peak_bytes);
  const std::uint64_t moved = g.tensors()[*g.find("attn.probs")].bytes + g.tensors()[*g.find("attn.drop_out")].bytes;
  EXPECT_EQ(t.host_bytes_per_block, (std::vector<std::uint64_t>{moved, 0}));
  EXPECT_EQ(t.saved_bytes_per_block[0], g.saved_bytes() - moved);
}

TEST(ScheduleV2, FilesSayVersion2OnlyWhenTheyNeedItAndVersion1FilesStayVersion1) {
  const ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 2);
  const BlockGraph g(m);
  EXPECT_EQ(schedule_to_json(store_all_schedule(2))["version"], 1);
  const Names drop = g.module_tensors({"core_attn"});
  const Schedule v2 = inside(2, saved_without(g, drop), drop);
  nlohmann::json j = schedule_to_json(v2);
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["actions"][2]["recompute"], nlohmann::json(drop));
  EXPECT_FALSE(j["actions"][2].contains("keep"));
  const Schedule back = schedule_from_json(j);
  ASSERT_EQ(back.actions.size(), v2.actions.size());
  EXPECT_EQ(back.actions[2].keep.to_string(), v2.actions[2].keep.to_string());
  EXPECT_EQ(schedule_to_json(back), j);
  // The same action in a file that says version 1: refused, with its index.
  j["version"] = 1;
  try {
    schedule_from_json(j);
    ADD_FAILURE() << "a version 1 file with a version 2 action was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("action 2: backward 1 of the named tensors"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("version 2 action, and the file says version 1"), std::string::npos) << e.what();
  }
  j["version"] = 3;
  EXPECT_THROW(schedule_from_json(j), Error);
  j["version"] = 2;
  j["actions"][0]["recompute"] = nlohmann::json::array({"attn.probs"});  // on a forward
  EXPECT_THROW(schedule_from_json(j), Error);
  j["actions"][0].erase("recompute");
  j["actions"][2]["keep"] = "all";  // both on a backward
  EXPECT_THROW(schedule_from_json(j), Error);
  j["actions"][2].erase("keep");
  j["actions"][2]["recompute"] = nlohmann::json::array();  // empty
  EXPECT_THROW(schedule_from_json(j), Error);
  // A backward naming no tensor is a plain one: written as version 1 and read back the same.
  Schedule plain = store_all_schedule(2);
  plain.actions[2].keep = Keep::named({});
  const nlohmann::json pj = schedule_to_json(plain);
  EXPECT_EQ(pj["version"], 1);
  EXPECT_FALSE(pj["actions"][2].contains("recompute"));
  EXPECT_EQ(schedule_to_json(schedule_from_json(pj)), pj);
  EXPECT_NO_THROW(validate_schedule(plain, g));
  // An offload naming no tensor is refused by the rules (a file cannot hold one either).
  Schedule none_moved;
  none_moved.blocks = 2;
  none_moved.forward(0);
  none_moved.offload(0, Keep::named({}));
  EXPECT_NE(reason(none_moved, g).find("the offload of block 0 names no tensor"), std::string::npos);
  // "version": 1.0 reads as 1, as before.
  nlohmann::json v = schedule_to_json(store_all_schedule(2));
  v["version"] = 1.0;
  EXPECT_NO_THROW(schedule_from_json(v));
}

}  // namespace
}  // namespace remat
