// Weights as Hugging Face shards them: model.safetensors.index.json over several safetensors
// files, read through the index or its directory and written by --save-shard-size; every
// inconsistency between the index and its shards refused before any data is read.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/model_state.h"
#include "core/io/safetensors.h"
#include "core/io/weight_files.h"
#include "core/model/model_source.h"
#include "core/model/param_layout.h"
#include "core/util/error.h"
#include "engine_test_util.h"
#include "test_files.h"

namespace remat {
namespace {

namespace fs = std::filesystem;
using testing::message_of;
using testing::slurp;
using testing::spit;
using testing::TempDir;

::testing::AssertionResult mentions(const std::string& msg, const std::string& what) {
  return msg.find(what) != std::string::npos ? ::testing::AssertionSuccess()
                                             : ::testing::AssertionFailure() << "'" << what << "' not in: " << msg;
}

// The same names, dtypes, shapes and value bits.
::testing::AssertionResult same(const std::map<std::string, SafeTensor>& a, const std::map<std::string, SafeTensor>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " tensors, " << b.size();
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end()) return ::testing::AssertionFailure() << "no '" << name << "'";
    const SafeTensor& u = it->second;
    if (t.dtype != u.dtype || t.shape != u.shape || t.values.size() != u.values.size() ||
        std::memcmp(t.values.data(), u.values.data(), t.values.size() * sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "'" << name << "' differs";
  }
  return ::testing::AssertionSuccess();
}

// A model's initial weights (seed 42) as one flat vector.
std::vector<float> initial_weights(const ModelConfig& m) {
  CpuBackend be(1);
  LogicalClock clock;
  TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
  ModelState s(m, be, alloc);
  s.init_weights(42);
  return s.read_params();
}

// Loads `path` into a fresh state of `m` and returns what it holds.
std::vector<float> loaded(const std::string& path, const ModelConfig& m) {
  CpuBackend be(1);
  LogicalClock clock;
  TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
  ModelState s(m, be, alloc);
  load_weights(path, s);
  return s.read_params();
}

TEST(WeightShards, TensorsAreSplitInOrderAsHuggingFaceSplitsThem) {
  EXPECT_EQ(shard_tensors({10, 10, 10, 25, 5, 5}, 20), (std::vector<std::size_t>{0, 0, 1, 2, 3, 3}));
  EXPECT_EQ(shard_tensors({30, 1}, 20), (std::vector<std::size_t>{0, 1}));  // a larger tensor alone
  EXPECT_EQ(shard_tensors({1, 1, 1}, 1000), (std::vector<std::size_t>{0, 0, 0}));
  EXPECT_TRUE(shard_tensors({}, 10).empty());
  EXPECT_EQ(shard_file_name(0, 3), "model-00001-of-00003.safetensors");
  EXPECT_EQ(shard_file_name(11, 12), "model-00012-of-00012.safetensors");
}

TEST(WeightShards, ASavedShardedModelLoadsBitForBitAsTheOneFile) {
  // GPT-2 (Conv1D weights transposed), Llama (q|k|v and gate|up split), GPT-NeoX (q|k|v stored
  // by head).
  for (Family family : {Family::Gpt2, Family::Llama, Family::GptNeox}) {
    SCOPED_TRACE(to_string(family));
    const ModelConfig m = testing::small_model(family, AttentionImpl::Naive, 0.0, DType::F32);
    const ParamLayout layout(m);
    const std::vector<float> w = initial_weights(m);
    TempDir d;
    write_weights(d / "one.safetensors", w, layout, 0);
    const std::uint64_t shard = 40000;  // several tensors a shard, and tensors larger than that alone
    write_weights(d / "shards", w, layout, shard);

    // The directory holds what sharded_files says, and the index maps every tensor.
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(d / "shards")) files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    std::vector<std::string> expected = sharded_files(layout, shard);
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(files, expected);
    ASSERT_GE(files.size(), 4u);
    const nlohmann::json index = nlohmann::json::parse(slurp(d / "shards/model.safetensors.index.json"));
    std::uint64_t total = 0;
    for (const auto& [name, bytes] : hf_tensor_bytes(layout)) {
      total += bytes;
      ASSERT_TRUE(index["weight_map"].contains(name)) << name;
    }
    EXPECT_EQ(index["weight_map"].size(), hf_tensor_bytes(layout).size());
    EXPECT_EQ(index["metadata"]["total_size"].get<std::uint64_t>(), total);
    // Each shard holds at most the size asked for, unless one tensor is larger.
    for (std::size_t i = 0; i + 1 < files.size(); ++i) {
      const SafetensorsHeader h = read_safetensors_header(d / ("shards/" + files[i]));
      EXPECT_TRUE(h.data_bytes() <= shard || h.entries.size() == 1) << files[i];
    }

    // Through the index, its directory, and the one file: the same bits, as the values were.
    const std::vector<float> one = loaded(d / "one.safetensors", m);
    EXPECT_EQ(one, w);
    EXPECT_EQ(loaded(d / "shards/model.safetensors.index.json", m), one);
    EXPECT_EQ(loaded(d / "shards", m), one);
    EXPECT_TRUE(same(read_weight_files(open_weight_files(d / "shards")), read_safetensors(d / "one.safetensors")));
    // The one file by its directory too.
    fs::create_directories(d / "single");
    fs::copy_file(d / "one.safetensors", d / "single/model.safetensors");
    EXPECT_EQ(loaded(d / "single", m), one);
  }
}

// A hand-made sharded checkpoint: shards a.safetensors {x, y} and b.safetensors {z}, with an
// index; `edit` changes the index before it is written.
struct Shards {
  TempDir d;
  nlohmann::json index;
  Shards() {
    write_safetensors(d / "a.safetensors", {{"x", {"F32", {2}, {1.f, 2.f}}}, {"y", {"F32", {1}, {3.f}}}});
    write_safetensors(d / "b.safetensors", {{"z", {"F32", {2, 2}, {4.f, 5.f, 6.f, 7.f}}}});
    index = {{"metadata", {{"total_size", 28}}},
             {"weight_map", {{"x", "a.safetensors"}, {"y", "a.safetensors"}, {"z", "b.safetensors"}}}};
  }
  std::string path() const { return d / "model.safetensors.index.json"; }
  std::string refusal() {
    spit(path(), index.dump());
    return message_of([&] { open_weight_files(path()); });
  }
};

TEST(WeightShards, AnIndexReadsItsShardsByName) {
  Shards s;
  EXPECT_EQ(s.refusal(), "(no error)");
  const WeightFiles w = open_weight_files(s.path());
  EXPECT_EQ(w.index, s.path());
  ASSERT_EQ(w.files.size(), 2u);
  EXPECT_EQ(w.paths(), (std::vector<std::string>{s.path(), s.d / "a.safetensors", s.d / "b.safetensors"}));
  const auto t = read_weight_files(w);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t.at("z").values, (std::vector<float>{4.f, 5.f, 6.f, 7.f}));
  EXPECT_EQ(t.at("y").values, (std::vector<float>{3.f}));
  // No total_size, or a metadata without one, or an integral number: the same.
  s.index["metadata"].erase("total_size");
  EXPECT_EQ(s.refusal(), "(no error)");
  s.index.erase("metadata");
  EXPECT_EQ(s.refusal(), "(no error)");
  s.index["metadata"] = {{"total_size", 28.0}, {"total_parameters", 7}};
  EXPECT_EQ(s.refusal(), "(no error)");
  // Told by its content when its name does not say it: JSON, not a safetensors header.
  spit(s.d / "index-by-another-name", "\n  " + s.index.dump());
  EXPECT_EQ(open_weight_files(s.d / "index-by-another-name").files.size(), 2u);
  // A shard's name may hold a folder under the index's.
  fs::create_directories(s.d / "sub");
  fs::rename(s.d / "b.safetensors", s.d / "sub/b.safetensors");
  s.index["weight_map"]["z"] = "sub/b.safetensors";
  EXPECT_EQ(s.refusal(), "(no error)");
}

TEST(WeightShards, AnIndexAtOddsWithItsShardsIsRefusedNamingTheFileAndField) {
  {
    Shards s;
    spit(s.path(), "this is not JSON");
    const std::string m = message_of([&] { open_weight_files(s.path()); });
    EXPECT_TRUE(mentions(m, "weights index '" + s.path() + "'"));
    EXPECT_TRUE(mentions(m, "not valid JSON"));
    EXPECT_FALSE(mentions(m, "header length"));
  }
  auto refused = [](const std::function<void(Shards&)>& edit, const std::vector<std::string>& words) {
    Shards s;
    edit(s);
    const std::string m = s.refusal();
    EXPECT_TRUE(mentions(m, "weights index '" + s.path() + "'"));
    for (const auto& w : words) EXPECT_TRUE(mentions(m, w));
  };
  refused([](Shards& s) { s.index.erase("weight_map"); }, {"no \"weight_map\""});
  refused([](Shards& s) { s.index = nlohmann::json::array(); }, {"not a JSON object"});
  refused([](Shards& s) { s.index["weight_map"] = nlohmann::json::object(); }, {"weight_map must be an object"});
  refused([](Shards& s) { s.index["weight_map"]["x"] = 3; }, {"weight_map['x']", "file name"});
  refused([](Shards& s) { s.index["weight_map"]["x"] = "/etc/a.safetensors"; }, {"weight_map['x']", "relative"});
  refused([](Shards& s) { s.index["weight_map"]["x"] = "../a.safetensors"; }, {"weight_map['x']", "outside"});
  refused([](Shards& s) { s.index["metadata"] = 5; }, {"metadata must be an object"});
  refused([](Shards& s) { s.index["metadata"]["total_size"] = "28"; }, {"metadata.total_size", "whole number"});
  // A shard the index names that is not there.
  refused([](Shards& s) { fs::remove(s.d / "b.safetensors"); },
          {"shard 'b.safetensors'", "'z'", "is missing", "b.safetensors' is not there"});
  // One tensor in two shards' headers.
  refused(
      [](Shards& s) {
        write_safetensors(s.d / "b.safetensors", {{"z", {"F32", {2, 2}, {4.f, 5.f, 6.f, 7.f}}}, {"x", {"F32", {2}, {0.f, 0.f}}}});
      },
      {"tensor 'x' is in two shards", "'a.safetensors'", "'b.safetensors'"});
  // A tensor the weight_map puts in a shard that does not hold it.
  refused([](Shards& s) { s.index["weight_map"]["w"] = "b.safetensors"; },
          {"tensor 'w'", "shard 'b.safetensors'", "does not hold it"});
  // A shard holding a tensor the weight_map does not list, or lists under another shard.
  refused([](Shards& s) { s.index["weight_map"].erase("y"); },
          {"shard 'a.safetensors' holds tensor 'y'", "does not list"});
  refused([](Shards& s) { s.index["weight_map"]["y"] = "b.safetensors"; },
          {"shard 'a.safetensors' holds tensor 'y'", "puts in 'b.safetensors'"});
  // total_size other than the shards' data.
  refused([](Shards& s) { s.index["metadata"]["total_size"] = 32; },
          {"metadata.total_size is 32 bytes", "hold 28"});
  // A shard that is no safetensors file: its own message, the shard and the index named.
  {
    Shards s;
    spit(s.d / "b.safetensors", "{}");
    const std::string m = s.refusal();
    EXPECT_TRUE(mentions(m, "safetensors file '" + s.d / "b.safetensors" + "'"));
    EXPECT_TRUE(mentions(m, "a shard of '" + s.path() + "'"));
  }
}

TEST(WeightShards, ADirectoryHoldsOneFileOrOneIndex) {
  Shards s;
  spit(s.path(), s.index.dump());
  EXPECT_EQ(open_weight_files(s.d.path().string()).index, s.path());
  fs::copy_file(s.d / "a.safetensors", s.d / "model.safetensors");
  EXPECT_TRUE(mentions(message_of([&] { open_weight_files(s.d.path().string()); }), "holds both"));
  TempDir empty;
  const std::string m = message_of([&] { open_weight_files(empty.path().string()); });
  EXPECT_TRUE(mentions(m, "holds neither model.safetensors nor model.safetensors.index.json"));
  EXPECT_TRUE(mentions(m, empty.path().string()));
}

TEST(WeightShards, AMissingMisshapenOrUnknownTensorNamesItsShard) {
  const ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.0, DType::F32);
  const ParamLayout layout(m);
  TempDir d;
  write_weights(d / "shards", initial_weights(m), layout, 40000);
  const std::string index = d / "shards/model.safetensors.index.json";
  const WeightFiles w = open_weight_files(index);
  EXPECT_NO_THROW(check_weight_files(w, layout, m.family));
  // Misshapen: a model with another vocabulary, whose embedding's shard is named.
  ModelConfig other = m;
  other.vocab = 128;
  const std::string shard_of_wte = w.files[w.file_of.at("transformer.wte.weight")].path;
  std::string msg = message_of([&] { check_weight_files(w, ParamLayout(other), other.family); });
  EXPECT_TRUE(mentions(msg, "tensor 'transformer.wte.weight' has shape 256x64, expected 128x64"));
  EXPECT_TRUE(mentions(msg, "safetensors file '" + shard_of_wte + "' (a shard of '" + index + "')"));
  // Missing: the index named (no shard holds it).
  const ModelConfig llama = testing::small_model(Family::Llama, AttentionImpl::Naive, 0.0, DType::F32);
  msg = message_of([&] { check_weight_files(w, ParamLayout(llama), llama.family); });
  EXPECT_TRUE(mentions(msg, "weights index '" + index + "': missing tensor 'model.embed_tokens.weight'"));
  // Unknown: a shard holding a tensor of no such model, listed in the index.
  write_safetensors(d / "shards/extra.safetensors", {{"extra.weight", {"F32", {1}, {0.f}}}});
  nlohmann::json j = nlohmann::json::parse(slurp(index));
  j["weight_map"]["extra.weight"] = "extra.safetensors";
  j["metadata"]["total_size"] = j["metadata"]["total_size"].get<std::uint64_t>() + 4;
  spit(index, j.dump());
  msg = message_of([&] { check_weight_files(open_weight_files(index), layout, m.family); });
  EXPECT_TRUE(mentions(msg, "safetensors file '" + d / "shards/extra.safetensors" + "' (a shard of '" + index + "')"));
  EXPECT_TRUE(mentions(msg, "tensor 'extra.weight' is not part of this model"));
  // The same check stops a load before anything is written into the state.
  CpuBackend be(1);
  LogicalClock clock;
  TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
  ModelState s(m, be, alloc);
  EXPECT_TRUE(mentions(message_of([&] { load_weights(index, s); }), "extra.weight"));
}

TEST(WeightShards, ASavedShardDirectoryIsCheckedBeforeAnythingIsWritten) {
  const ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.0, DType::F32);
  const ParamLayout layout(m);
  TempDir d;
  spit(d / "file", "x");
  EXPECT_TRUE(mentions(message_of([&] { check_sharded_output(d / "file", layout, 1 << 20, {}, "--save-weights"); }),
                  "--save-weights '" + d / "file" + "' is not a directory"));
  EXPECT_TRUE(mentions(message_of([&] { check_sharded_output(d / "no/dir", layout, 1 << 20, {}, "--save-weights"); }),
                  "no directory '" + d / "no" + "'"));
  fs::create_directories(d / "one");
  spit(d / "one/model.safetensors", "x");
  EXPECT_TRUE(mentions(message_of([&] { check_sharded_output(d / "one", layout, 1 << 20, {}, "--save-weights"); }),
                  "holds model.safetensors"));
  // A shard that is an input of the command is never written over.
  write_weights(d / "in", initial_weights(m), layout, 1 << 20);
  InputFiles inputs;
  for (const auto& p : open_weight_files(d / "in").paths()) inputs.add(p, "--load-weights");
  const std::string before = slurp(d / "in/model-00001-of-00001.safetensors");
  EXPECT_TRUE(mentions(message_of([&] { check_sharded_output(d / "in", layout, 1 << 20, inputs, "--save-weights"); }),
                  "--load-weights"));
  EXPECT_THROW(write_weights(d / "in", std::vector<float>(static_cast<std::size_t>(layout.total()), 1.f), layout,
                             1 << 20, inputs, "--save-weights"),
               Error);
  EXPECT_EQ(slurp(d / "in/model-00001-of-00001.safetensors"), before);
  // A directory that is not there yet is made; one that is, written into.
  EXPECT_NO_THROW(check_sharded_output(d / "new", layout, 1 << 20, {}, "--save-weights"));
  write_weights(d / "new", initial_weights(m), layout, 1 << 20);
  EXPECT_EQ(loaded(d / "new", m), initial_weights(m));
}

// The smallest preset, one step from weights it was given, as a file, an index and a directory.
TEST(WeightShards, ARunFromAnIndexEqualsARunFromTheOneFile) {
  const ModelConfig m = resolve_model("tiny");
  const ParamLayout layout(m);
  TempDir d;
  const std::vector<float> w = initial_weights(m);
  write_weights(d / "w.safetensors", w, layout, 0);
  write_weights(d / "w", w, layout, 256 << 10);
  ASSERT_GT(sharded_files(layout, 256 << 10).size(), 3u);
  auto run = [&](const std::string& in, const std::string& out, std::uint64_t shard_bytes) {
    CpuBackend be(2);
    SteadyClock clock;
    RunSpec spec;
    spec.model = m;
    spec.schedule = testing::checkpoint_all_schedule(m.layers);
    spec.steps = 1;
    spec.warmup = 0;
    spec.seed = 3;
    spec.weights_in = in;
    spec.weights_out = out;
    spec.grads_out = out + "-grads";
    spec.shard_bytes = shard_bytes;
    return run_training(spec, be, nullptr, clock);
  };
  const Trace one = run(d / "w.safetensors", d / "after-one.safetensors", 0);
  ASSERT_EQ(one.status, "ok") << one.error;
  for (const std::string& in : {d / "w/model.safetensors.index.json", d / "w"}) {
    SCOPED_TRACE(in);
    const std::string out = d / ("after-" + std::to_string(in.size()));
    const Trace t = run(in, out, 256 << 10);
    ASSERT_EQ(t.status, "ok") << t.error;
    EXPECT_EQ(t.losses(), one.losses());
    EXPECT_EQ(t.grad_checksum, one.grad_checksum);
    EXPECT_TRUE(same(read_weight_files(open_weight_files(out)), read_safetensors(d / "after-one.safetensors")));
    EXPECT_TRUE(
        same(read_weight_files(open_weight_files(out + "-grads")), read_safetensors(d / "after-one.safetensors-grads")));
  }
  // Bad input is refused before the run: an exception, not a run that ended in an error.
  nlohmann::json j = nlohmann::json::parse(slurp(d / "w/model.safetensors.index.json"));
  j["metadata"]["total_size"] = 1;
  spit(d / "w/model.safetensors.index.json", j.dump());
  EXPECT_TRUE(mentions(message_of([&] { run(d / "w", d / "never", 0); }), "metadata.total_size"));
  EXPECT_FALSE(fs::exists(d / "never"));
  // Saving the shards over the ones being read is refused before the run too.
  write_weights(d / "w", w, layout, 256 << 10);
  EXPECT_TRUE(mentions(message_of([&] { run(d / "w", d / "w", 256 << 10); }), "--load-weights"));
}

}  // namespace
}  // namespace remat
