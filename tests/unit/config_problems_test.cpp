// A Hugging Face import that finds several problems throws them as a list (ConfigProblems),
// besides the one message naming them all, so a front end can show each on its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/model/model_config.h"
#include "core/util/error.h"

namespace remat {
namespace {

nlohmann::json gpt2() {
  return {{"model_type", "gpt2"}, {"n_layer", 2}, {"n_embd", 64}, {"n_head", 4},
          {"n_positions", 32}, {"vocab_size", 256}};
}

TEST(ConfigProblems, EveryProblemOfAnImportIsListedWithItsField) {
  nlohmann::json bad = gpt2();
  bad["activation_function"] = "relu";
  bad["tie_word_embeddings"] = "no";
  bad["sliding_window"] = 8;
  bad.erase("n_head");
  try {
    model_from_hf_json(bad, "x");
    FAIL() << "accepted";
  } catch (const ConfigProblems& e) {
    std::vector<std::string> fields;
    for (const auto& [f, m] : e.problems()) {
      fields.push_back(f);
      EXPECT_FALSE(m.empty()) << f;
      EXPECT_NE(m.rfind(f + ": ", 0), 0u) << "the message repeats its field: " << m;
    }
    std::sort(fields.begin(), fields.end());
    EXPECT_EQ(fields, (std::vector<std::string>{"activation_function", "n_head", "sliding_window",
                                                "tie_word_embeddings"}));
    // The ConfigError it also is: the first field, and one message saying every problem.
    const auto& list = e.problems();
    EXPECT_EQ(e.field(), list.front().first);
    std::string joined = list[0].first + ": " + list[0].second;
    for (std::size_t i = 1; i < list.size(); ++i) joined += "; also " + list[i].first + ": " + list[i].second;
    EXPECT_EQ(std::string(e.what()), joined + " (4 problems)");
  }
}

TEST(ConfigProblems, OneProblemIsAListOfOne) {
  nlohmann::json bad = gpt2();
  bad["scale_attn_by_inverse_layer_idx"] = "yes";
  try {
    model_from_hf_json(bad, "x");
    FAIL() << "accepted";
  } catch (const ConfigProblems& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_EQ(e.problems()[0].first, "scale_attn_by_inverse_layer_idx");
    EXPECT_EQ(std::string(e.what()), "scale_attn_by_inverse_layer_idx: " + e.problems()[0].second);
  }
}

}  // namespace
}  // namespace remat
