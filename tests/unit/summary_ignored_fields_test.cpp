// The fields of an imported config that change nothing are in summary.json as a list,
// `ignored_config_fields` (format version 4 on): a run of SmolLM2's published config.json lists
// them, a preset's list is empty, and run directories of older versions read with none.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/model_config.h"
#include "core/model/model_source.h"
#include "core/schedule/schedule.h"
#include "core/trace/run_dir.h"
#include "core/trace/summary.h"
#include "core/util/error.h"
#include "engine_test_util.h"
#include "trace_test_util.h"

namespace fs = std::filesystem;

namespace remat {
namespace {

using testing::read_error;
using testing::slurp;
using testing::spit;
using testing::TempDir;

const std::string kData = REMAT_TEST_DATA_DIR;

// SmolLM2-135M as published, made small enough to train a step in a few milliseconds; what it
// ignored on import stays with it.
ModelConfig small_smollm2() {
  ModelConfig m = load_model_file(kData + "/hf-configs/smollm2-135m.json");
  m.layers = 1;
  m.hidden = 96;
  m.heads = 3;
  m.kv_heads = 1;
  m.head_size = 0;
  m.ffn = 128;
  m.vocab = 256;
  m.seq = 16;
  m.batch = 1;
  m.dtype = DType::F32;
  return m;
}

TEST(IgnoredConfigFields, ARunOfAnImportedConfigListsThemInItsSummary) {
  const ModelConfig m = small_smollm2();
  for (const char* f : {"is_llama_config", "rope_interleaved", "pretraining_tp"})
    EXPECT_NE(std::find(m.ignored_fields.begin(), m.ignored_fields.end(), f), m.ignored_fields.end()) << f;
  const Trace t = testing::train(m, store_all_schedule(m.layers), 1, 0);
  ASSERT_TRUE(t.complete) << t.error;
  const nlohmann::json s = summary_json(t);
  EXPECT_EQ(s["format_version"], kTraceFormatVersion);
  ASSERT_TRUE(s.contains("ignored_config_fields"));
  EXPECT_EQ(s["ignored_config_fields"].get<std::vector<std::string>>(), m.ignored_fields);
  // Written and read back: the file holds the list, and so does the model read from it.
  TempDir d;
  write_run_dir(t, d / "run", false);
  const nlohmann::json on_disk = nlohmann::json::parse(slurp(d / "run/summary.json"));
  EXPECT_EQ(on_disk["ignored_config_fields"], s["ignored_config_fields"]);
  EXPECT_FALSE(on_disk["model"].contains("ignored_config_fields"));  // not a key of our model format
  const Trace r = read_run_dir(d / "run");
  EXPECT_EQ(r.model.ignored_fields, m.ignored_fields);
  nlohmann::json written = on_disk;
  written.erase("files");
  EXPECT_EQ(summary_json(r), written);
}

TEST(IgnoredConfigFields, APresetsListIsEmptyButPresent) {
  const ModelConfig tiny = resolve_model("tiny");
  EXPECT_TRUE(tiny.ignored_fields.empty());
  Trace t = testing::synthetic_trace(2, 20);
  t.model.ignored_fields.clear();
  const nlohmann::json s = summary_json(t);
  ASSERT_TRUE(s.contains("ignored_config_fields"));
  EXPECT_EQ(s["ignored_config_fields"], nlohmann::json::array());
}

TEST(IgnoredConfigFields, OlderVersionsReadWithNoneAndVersion4NeedsTheList) {
  for (const char* v : {"run-v1", "run-v2", "run-v3"}) {
    SCOPED_TRACE(v);
    const nlohmann::json on_disk = nlohmann::json::parse(slurp(kData + "/" + v + "/summary.json"));
    ASSERT_FALSE(on_disk.contains("ignored_config_fields"));
    const Trace t = read_run_dir(kData + "/" + v);
    EXPECT_TRUE(t.model.ignored_fields.empty());
    EXPECT_FALSE(summary_json(t).contains("ignored_config_fields"));  // written back as its version has it
  }
  TempDir d;
  auto edited = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    fs::copy(kData + "/run-v4", d / name, fs::copy_options::recursive);
    nlohmann::json j = nlohmann::json::parse(slurp(d / (name + "/summary.json")));
    edit(j);
    spit(d / (name + "/summary.json"), j.dump(2));
    return read_error(d / name);
  };
  std::string e = edited("missing", [](nlohmann::json& j) { j.erase("ignored_config_fields"); });
  EXPECT_NE(e.find("missing field 'ignored_config_fields' (format version 4 has it)"), std::string::npos) << e;
  e = edited("numbers", [](nlohmann::json& j) { j["ignored_config_fields"] = {1, 2}; });
  EXPECT_NE(e.find("field 'ignored_config_fields' must be an array of strings"), std::string::npos) << e;
  e = edited("listed", [](nlohmann::json& j) { j["ignored_config_fields"] = {"use_cache"}; });
  EXPECT_EQ(e, "no error");
  EXPECT_EQ(read_run_dir(d / "listed").model.ignored_fields, std::vector<std::string>{"use_cache"});
}

}  // namespace
}  // namespace remat
