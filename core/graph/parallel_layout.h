// How one training step is split over ranks as Megatron-LM lays it out: tensor parallelism
// (column- and row-parallel linears, heads split), sequence parallelism (the norms, dropouts and
// residuals on s/T of the sequence), pipeline stages (1F1B), data parallelism and the ZeRO
// stages, and the per-rank block table that follows from it. Nothing here runs processes: the
// per-rank table is what one rank's blocks hold, so every policy plans it as it plans a model's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph/block_graph.h"

namespace remat {

struct ParallelLayout {
  int tp = 1;                 // T: tensor-parallel ranks
  bool sp = false;            // sequence parallelism over the T ranks (needs tp > 1)
  int pp = 1;                 // P: pipeline stages (1F1B)
  int dp = 1;                 // D: data-parallel replicas
  int zero = 0;               // 0 (none), 1 (optimizer states), 2 (+ gradients), 3 (+ parameters)
  bool distribute_saved_activations = false;  // the checkpointed block inputs split over T
  int micro_batches = 0;      // N per replica and step; 0: P (or, with global_batch, derived)
  std::int64_t global_batch = 0;  // sequences per step over all replicas; 0: b·N·D
  // Blocks of the first and the last stage when they differ from the others' (Megatron's
  // decoder_first/last_pipeline_num_layers); 0: the same as every stage.
  int first_stage_layers = 0, last_stage_layers = 0;

  // Micro-batches per step after validation (N).
  int micro_batches_of(const ModelConfig& m) const;
  // Blocks of stage i (0 <= i < pp) and the first block it holds, after validation.
  int stage_layers(const ModelConfig& m, int stage) const;
  int stage_first_block(const ModelConfig& m, int stage) const;
  std::string to_string() const;  // "tp 8 sp, pp 2, dp 4, zero 1"
};

// Refuses a layout the model cannot be split by, with the numbers: heads or kv-heads, ffn or
// vocab not divisible by T, layers not divisible by P (or, with first/last stage layers, the
// rest not divisible by the other stages), fewer micro-batches than P (1F1B), a
// global batch not divisible by D or by b·D, sp without tp > 1, zero outside 0..3, the sequence
// not divisible by T with sp, distribute_saved_activations without tp > 1 or with sp.
// Throws ConfigError naming the field.
void validate_layout(const ParallelLayout& p, const ModelConfig& m);

// Where a block tensor lives under tensor parallelism. `Sequence`: the full hidden width between
// the row-parallel and the next column-parallel linear (replicated over T, or split on the
// sequence with sp); `Tensor`: inside a column-parallel .. row-parallel pair (1/T per rank).
enum class Region : std::uint8_t { Sequence, Tensor };
const char* to_string(Region r);

// Regions of a block table's tensors and steps, derived from its steps: the block input is in
// `Sequence`; a linear whose input is in `Sequence` is column-parallel (its output in `Tensor`),
// one whose input is in `Tensor` is row-parallel (output in `Sequence`); any other step's outputs
// live where its inputs do; a dropout mask where the step that reads it runs. A step whose
// inputs come from both regions is refused (Error naming it).
struct BlockRegions {
  std::vector<Region> tensor;  // per tensor index
  std::vector<Region> step;    // per step index: where its outputs live
  std::vector<bool> row_parallel;  // per step: a linear reading the Tensor region
};
BlockRegions block_regions(const BlockGraph& g);

// The share of a tensor one rank holds, num/den of its elements.
struct Share {
  std::int64_t num = 1, den = 1;
};
// The one place a block tensor's per-rank share is decided: 1/T in the Tensor region; 1/T in the
// Sequence region with sp; else all of it. (distribute_saved_activations does not change the
// table: the executor keeps 1/T of a checkpointed block input and gathers it before the
// recompute, ExecOptions::distribute_saved.)
Share tensor_share(const BlockGraph& g, const BlockRegions& r, int tensor, const ParallelLayout& p);

// The model one tensor-parallel rank holds: a/T query heads and kv/T kv-heads of the same head
// size, ffn/T, everything else as the model's (the embedding and the head replicated).
ModelConfig tensor_rank_model(const ModelConfig& m, int tp);

// One rank's block table (its config is tensor_rank_model's of the stage's model): every tensor's elements and bytes scaled by its share (formulas say
// "/t"), every step's work scaled as its rank does it (column-parallel: N/T, row-parallel: K/T,
// attention: B·heads/T, other steps by their region's share), for a model of the stage's blocks
// (L/P unless the first or last stage differs). The layout must be valid for the model
// (validate_layout).
BlockGraph per_rank_graph(const ModelConfig& m, const ParallelLayout& p, int stage = 0);

// The stage's model: the same block with the stage's layers.
ModelConfig stage_model(const ModelConfig& m, const ParallelLayout& p, int stage = 0);

}  // namespace remat
