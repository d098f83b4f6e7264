// One pipeline stage of a run (`run --pp P`): the blocks and the parameters outside them it
// holds, the model its executor runs (one micro-batch of the stage's blocks, a tensor-parallel
// rank's share of them with T > 1), its initial weights as the single-process initialization's
// values of exactly those parameters, and the checks a pipeline run makes before it starts.
#pragma once
#include <cstdint>
#include <vector>

#include "core/engine/weight_init.h"
#include "core/graph/parallel_layout.h"
#include "core/model/param_layout.h"

namespace remat {

struct StageCut {
  int stage = 0, stages = 1;
  int first_block = 0, blocks = 0;  // the whole model's blocks [first_block, first_block + blocks)
  LayoutParts parts;                // the embedding on the first stage, the head on the last
};
// `p` must be valid for `m` (validate_layout; m.batch the micro-batch).
StageCut stage_cut(const ModelConfig& m, const ParallelLayout& p, int stage);

// The model stage `stage`'s executor runs: the stage's blocks, a tensor-parallel rank's heads
// and ffn (tensor_rank_model), the model's batch (the micro-batch).
ModelConfig stage_rank_model(const ModelConfig& m, const ParallelLayout& p, int stage);

// Where the stage's rank (tensor-parallel rank t) takes its initial weights from: runs over the
// whole model's layout ParamLayout(m), written to their places in the stage's layout
// ParamLayout(stage_rank_model(m, p, stage), stage_cut(...).parts). With T > 1 the tensor cut
// (rank_weight_runs) of the stage's parameters. A tied last stage's copy of the word embedding
// takes the embedding's own values.
std::vector<WeightRun> stage_weight_runs(const ModelConfig& m, const ParallelLayout& p, int stage, int t);
// Those values drawn (only them, on `threads` threads), in the stage's layout.
std::vector<float> stage_weight_values(const ModelConfig& m, const ParallelLayout& p, int stage, int t,
                                       std::uint64_t seed, int threads);

// What a pipeline run refuses before any process starts, with the numbers (ConfigError naming
// the option): the layout's own checks (validate_layout: layers not divisible by P, fewer
// micro-batches than P, a batch not divisible by D·N, ...), ZeRO with pipeline stages (not run
// yet), and a micro-batch that does not split the replica's batch. `m.batch` is the micro-batch.
void check_pipeline(const ModelConfig& m, const ParallelLayout& p);

}  // namespace remat
