// Weights in and out with Hugging Face names; corrupt files are refused with the reason.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/model_state.h"
#include "core/io/safetensors.h"
#include "core/util/error.h"
#include "engine_test_util.h"

namespace remat {
namespace {

TEST(Safetensors, RoundTripKeepsEveryWeightBitExactWithHuggingFaceNames) {
  for (int untied = 0; untied < 3; ++untied) {
    // GPT-2 and Llama as published, and GPT-2 with a head of its own ("lm_head.weight", outside
    // "transformer.").
    const Family arch = untied == 1 ? Family::Llama : Family::Gpt2;
    ModelConfig m = testing::small_model(arch, AttentionImpl::Naive, 0.0, DType::F32);
    if (untied == 2) m.tied_embeddings = false;
    CpuBackend be(1);
    LogicalClock clock;
    TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
    std::string path = ::testing::TempDir() + "/weights.safetensors";
    std::vector<float> before;
    {
      ModelState a(m, be, alloc);
      a.init_weights(42);
      before = a.read_params();
      save_safetensors(path, a);
    }
    auto file = read_safetensors(path);
    if (arch == Family::Gpt2) {
      ASSERT_TRUE(file.count("transformer.h.0.attn.c_attn.weight"));
      EXPECT_EQ(file["transformer.h.0.attn.c_attn.weight"].shape, (std::vector<std::int64_t>{64, 192}));
    } else {
      ASSERT_TRUE(file.count("model.layers.0.self_attn.k_proj.weight"));
      EXPECT_EQ(file["model.layers.0.self_attn.k_proj.weight"].shape, (std::vector<std::int64_t>{32, 64}));
    }
    ModelState b(m, be, alloc);
    load_safetensors(path, b);
    EXPECT_EQ(b.read_params(), before);
    if (arch == Family::Gpt2) {
      EXPECT_EQ(file.count("lm_head.weight"), untied == 2 ? 1u : 0u);
      // The bare GPT2Model's names (no "transformer.") read the same.
      std::map<std::string, SafeTensor> bare;
      for (auto& [name, t] : file) bare.emplace(name.rfind("transformer.", 0) == 0 ? name.substr(12) : name, t);
      EXPECT_EQ(flat_from_hf(bare, b.layout(), m.family, std::string("bare")), before);
    }
    std::remove(path.c_str());
  }
}

TEST(Safetensors, RefusesCorruptFilesNamingTheProblem) {
  std::string path = ::testing::TempDir() + "/bad.safetensors";
  auto expect_error = [&](const std::string& content, const std::string& what) {
    std::ofstream(path, std::ios::binary) << content;
    try {
      read_safetensors(path);
      FAIL() << "accepted a file: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error("abc", "too short");
  expect_error(std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}", "header length");
  std::string hdr = "{\"w\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}";
  std::string len(8, '\0');
  len[0] = static_cast<char>(hdr.size());
  expect_error(len + hdr + std::string(8, '\0'), "data offsets");
  // Headers of the wrong types and shapes whose element count overflows.
  for (const auto& [h, what] : std::vector<std::pair<std::string, std::string>>{
           {R"({"w": {"dtype": 4, "shape": [2], "data_offsets": [0, 8]}})", "'w' has a dtype that is not a string"},
           {R"({"w": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}})", "'w' has a bad shape"},
           {R"({"w": {"dtype": "F32", "shape": [4611686018427387905], "data_offsets": [0, 4]}})", "'w' has a bad shape"},
           {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": []}})", "'w' has bad data_offsets"},
           {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": 8}})", "'w' has bad data_offsets"},
           {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}})", "'w' has bad data_offsets"}}) {
    len[0] = static_cast<char>(h.size());
    expect_error(len + h + std::string(8, '\0'), what);
  }
  std::string junk = "{not json";
  len[0] = static_cast<char>(junk.size());
  expect_error(len + junk, "malformed header");
  EXPECT_THROW(read_safetensors("/nonexistent.safetensors"), Error);
  std::remove(path.c_str());
}

// A file of `header` (a JSON object) and `data_bytes` zero bytes of data.
std::string safetensors_bytes(const std::string& header, std::size_t data_bytes) {
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 255);
  return len + header + std::string(data_bytes, '\0');
}

TEST(Safetensors, TensorsThatShareBytesAreRefusedBeforeAnyIsRead) {
  std::string path = ::testing::TempDir() + "/alias.safetensors";
  auto message = [&](const std::string& header, std::size_t data_bytes) {
    std::ofstream(path, std::ios::binary) << safetensors_bytes(header, data_bytes);
    try {
      auto t = read_safetensors(path);
      return "accepted " + std::to_string(t.size()) + " tensors";
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  // Names aliasing one buffer: 20,000 of them over 3.3 MB once materialized 66 GB.
  std::string aliases = "{";
  for (int i = 0; i < 1000; ++i)
    aliases += std::string(i ? "," : "") + "\"w" + std::to_string(i) + "\": {\"dtype\": \"F32\", \"shape\": [256], \"data_offsets\": [0, 1024]}";
  aliases += "}";
  std::string m = message(aliases, 1024);
  EXPECT_NE(m.find("share bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("[0, 1024) and [0, 1024)"), std::string::npos) << m;
  // Overlapping ranges, as the reference implementation refuses them.
  m = message(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                  "b": {"dtype": "BF16", "shape": [4], "data_offsets": [8, 16]}})", 16);
  EXPECT_NE(m.find("tensors 'a' and 'b' share bytes (data_offsets [0, 16) and [8, 16))"), std::string::npos) << m;
  // Adjacent ranges, a gap, and empty tensors anywhere are fine.
  m = message(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                  "b": {"dtype": "F16", "shape": [2], "data_offsets": [8, 12]},
                  "c": {"dtype": "F32", "shape": [1], "data_offsets": [16, 20]},
                  "d": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},
                  "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [4, 4]}})", 20);
  EXPECT_EQ(m, "accepted 5 tensors");
  std::remove(path.c_str());
}

TEST(Safetensors, RefusesAMissingOrMisshapenTensor) {
  ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.0, DType::F32);
  CpuBackend be(1);
  LogicalClock clock;
  TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
  ModelState st(m, be, alloc);
  std::string path = ::testing::TempDir() + "/partial.safetensors";
  write_safetensors(path, {{"transformer.wte.weight", {"F32", {3, 3}, std::vector<float>(9, 0.f)}}});
  try {
    load_safetensors(path, st);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("transformer.wte.weight"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(Safetensors, AFailedWriteLeavesNothingAndNeverTruncatesAnotherFile) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "safetensors_failed_write";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "weights");  // a directory where the file should go
  const std::map<std::string, SafeTensor> t = {{"w", {"F32", {2}, {1.f, 2.f}}}};
  EXPECT_THROW(write_safetensors((dir / "weights").string(), t), Error);
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"weights"});
  EXPECT_TRUE(std::filesystem::is_empty(dir / "weights"));
  // A file of the user's that happens to have the name of a temporary file stays as it was.
  const std::string path = (dir / "w.safetensors").string();
  { std::ofstream(path + ".partial") << "mine"; }
  write_safetensors(path, t);
  std::ifstream in(path + ".partial");
  std::string mine;
  in >> mine;
  EXPECT_EQ(mine, "mine");
  EXPECT_EQ(read_safetensors(path).at("w").values, (std::vector<float>{1.f, 2.f}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace remat
