// Illegal schedules are refused at the first bad action, with its index and the reason.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/graph/block_graph.h"
#include "core/schedule/validator.h"
#include "core/util/error.h"
#include "engine_test_util.h"

namespace remat {
namespace {

void expect_bad(const Schedule& s, const BlockGraph& g, std::size_t index, const std::string& reason) {
  try {
    validate_schedule(s, g);
    FAIL() << "accepted";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.index(), index) << e.what();
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(Validator, AcceptsStoreAllAndCountsIt) {
  BlockGraph g(testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.1));
  ScheduleStats st = validate_schedule(store_all_schedule(3), g);
  EXPECT_EQ(st.block_forwards, 3u);
  EXPECT_EQ(st.flops_recompute, 0u);
  EXPECT_EQ(st.flops_forward, 3 * g.flops_forward());
}

TEST(Validator, RefusesIllegalActions) {
  BlockGraph g(testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.1));
  Schedule s;
  s.blocks = 3;
  s.forward(1);
  expect_bad(s, g, 0, "input is not available");

  s = Schedule{};
  s.blocks = 3;
  for (int b = 0; b < 3; ++b) s.forward(b);
  s.backward(0);
  expect_bad(s, g, 3, "must be reversed first");

  s = Schedule{};
  s.blocks = 3;
  for (int b = 0; b < 3; ++b) s.forward(b, Keep::input());
  s.backward(2);
  expect_bad(s, g, 3, "recompute it first");

  s = Schedule{};
  s.blocks = 3;
  for (int b = 0; b < 3; ++b) s.forward(b);
  s.backward(2);
  expect_bad(s, g, 4, "ends before block 1");

  s = Schedule{};
  s.blocks = 3;
  s.forward(0, Keep::named({"attn.nonsense"}));
  expect_bad(s, g, 0, "attn.nonsense");

  s = Schedule{};
  s.blocks = 3;
  s.checkpoint_slots = 1;
  s.forward(0, Keep::input());
  s.forward(1, Keep::input());
  expect_bad(s, g, 1, "2 checkpoints");

  s = Schedule{};
  s.blocks = 3;
  for (int b = 0; b < 3; ++b) s.forward(b);
  s.offload(2);
  s.backward(2);
  expect_bad(s, g, 4, "on the host");

  s = Schedule{};
  s.blocks = 4;
  expect_bad(s, g, 0, "3");
}

TEST(Validator, ScheduleJsonRoundTripsAndBadFilesAreRefused) {
  Schedule s = store_all_schedule(3);
  s.actions[0].keep = Keep::named({"ln1.out", "attn.qkv"});
  Schedule back = schedule_from_json(schedule_to_json(s));
  EXPECT_EQ(schedule_to_json(back), schedule_to_json(s));
  EXPECT_THROW(schedule_from_json(nlohmann::json::parse(R"({"blocks": 2})")), Error);
  EXPECT_THROW(schedule_from_json(nlohmann::json::parse(R"({"blocks": 2, "actions": [{"action": "fly", "block": 0}]})")), Error);
  // Optional fields of the wrong type are refused by name.
  for (const char* field : {"policy", "params", "checkpoint_slots"}) {
    for (const char* value : {"3", "[1]", "1e300", "\"2\""}) {
      nlohmann::json j = {{"blocks", 2}, {"actions", nlohmann::json::array()}};
      j[field] = nlohmann::json::parse(value);
      bool is_string = j[field].is_string();
      if (is_string == (std::string(field) != "checkpoint_slots")) continue;  // the right type
      try {
        schedule_from_json(j);
        ADD_FAILURE() << field << " = " << value << " accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(std::string("'") + field + "'"), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace remat
