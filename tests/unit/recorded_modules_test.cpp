// The bytes each module of a recorded PyTorch step held for backward
// (core/analysis/recorded_modules.h): parameters and tensors released before backward left out,
// a storage saved by two modules charged once, to the first.
#include <gtest/gtest.h>

#include "core/analysis/recorded_modules.h"

using namespace remat;

namespace {

RecordedTensor saved(const std::string& module, int block, std::uint64_t storage, std::uint64_t bytes,
                     bool held = true, bool parameter = false) {
  RecordedTensor t;
  t.module = module;
  t.block = block;
  t.storage = storage;
  t.storage_bytes = bytes;
  t.held_at_backward = held;
  t.parameter = parameter;
  return t;
}

}  // namespace

TEST(RecordedModules, EachStorageOnceForTheFirstModuleThatSavedIt) {
  RecordedRun r;
  r.tensors = {saved("wte", -1, 1, 4096, true, true),  // the embedding's weight: a parameter
               saved("h.0.attn", 0, 2, 1000), saved("h.0.attn", 0, 3, 500),
               saved("h.0.mlp", 0, 3, 500),             // the attention's output, saved again
               saved("h.0.mlp", 0, 4, 2000),
               saved("h.1.mlp", 1, 5, 700, false)};     // released before backward
  const auto rows = saved_bytes_per_module(r);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].module, "h.0.attn");
  EXPECT_EQ(rows[0].block, 0);
  EXPECT_EQ(rows[0].tensors, 2u);
  EXPECT_EQ(rows[0].bytes, 1500u);
  EXPECT_EQ(rows[1].module, "h.0.mlp");
  EXPECT_EQ(rows[1].tensors, 2u);
  EXPECT_EQ(rows[1].bytes, 2000u);
  // The rows sum to what the plan prediction counts as held in the recorded step.
  r.blocks = 2;
  r.blocks_module = "h";
  const auto p = predict_recorded_plan(r, parse_checkpoint_plan("per-block"));
  EXPECT_EQ(p.recorded_saved_bytes, rows[0].bytes + rows[1].bytes);
}

TEST(RecordedModules, NothingHeldNoRows) {
  RecordedRun r;
  r.tensors = {saved("h.0", 0, 1, 64, false)};
  EXPECT_TRUE(saved_bytes_per_module(r).empty());
}
