// Schedule files as `run --schedule FILE` reads them: the reader, then the validator against a
// model with as many blocks as the schedule names (up to 16), as the CLI does.
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
// to refer to.
const BlockGraph& graph(int layers) {
  static std::unique_ptr<BlockGraph> graphs[kMaxBlocks + 1];
  if (!graphs[layers]) {
    ModelConfig m;
    m.name = "fuzz";
    m.layers = layers;
    m.dropout = 0.1;
    graphs[layers] = std::make_unique<BlockGraph>(m);
  }
  return *graphs[layers];
}

}  // namespace

void schedule(const std::uint8_t* data, std::size_t size) {
  static const std::string path = scratch_path("schedule.json");
  write_file(path, data, size);
  refused_or_accepted([] {
    Schedule s = load_schedule_file(path);
    validate_schedule(s, graph(s.blocks >= 1 && s.blocks <= kMaxBlocks ? s.blocks : 2));
  });
}

}  // namespace remat::fuzz
