// Schedule files as `run --schedule FILE` reads them: the reader, then the validator against a
// model with as many blocks as the schedule names (up to 16), as the CLI does, and against one
// whose layer kinds give its blocks two tables.
#include <memory>

#include "core/graph/block_graph.h"
#include "core/schedule/schedule.h"
#include "core/schedule/validator.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"

namespace remat::fuzz {

namespace {

constexpr int kMaxBlocks = 16;

// GPT-2 with dropout: the block table with the most tensors, so named keep-sets have the most
// to refer to; and Llama with every second block without RoPE: two tables, each block's own.
const BlockGraph& graph(int layers, bool kinds) {
  static std::unique_ptr<BlockGraph> graphs[2][kMaxBlocks + 1];
  std::unique_ptr<BlockGraph>& g = graphs[kinds ? 1 : 0][layers];
  if (!g) {
    ModelConfig m;
    if (kinds) {
      set_family(m, Family::Llama);
      LayerKind nope{"nope"};
      nope.rope = false;
      m.layer_kinds = {LayerKind{"rope"}, nope};
      m.layer_pattern = {0, 1};
    }
    m.name = "fuzz";
    m.layers = layers;
    m.dropout = 0.1;
    g = std::make_unique<BlockGraph>(m);
  }
  return *g;
}

}  // namespace

void schedule(const std::uint8_t* data, std::size_t size) {
  static const std::string path = scratch_path("schedule.json");
  write_file(path, data, size);
  refused_or_accepted([] {
    Schedule s = load_schedule_file(path);
    const int blocks = s.blocks >= 1 && s.blocks <= kMaxBlocks ? s.blocks : 2;
    refused_or_accepted([&] { validate_schedule(s, graph(blocks, true)); });
    validate_schedule(s, graph(blocks, false));
  });
}

}  // namespace remat::fuzz
