// Weights and gradient files of a rank of a tensor-parallel, pipeline or ZeRO run, in the
// one-process format (safetensors under the whole model's Hugging Face names and shapes). A rank
// holds pieces of the whole model's flat vector: a tensor-parallel rank its runs
// (rank_weight_runs), a pipeline stage its parameters' (stage_weight_runs), a ZeRO rank the
// shard of its buffers. Loading: every rank reads the file and takes its own pieces. Saving:
// the pieces travel to rank 0 of the job through the ranks' communicators (all-gathers over
// the data-parallel group, then the tensor-parallel group of replica 0, then the stages of
// its tensor rank 0), which writes the whole file; the values are the ranks' own, bit for bit.
// A tied word embedding is stage 0's (the last stage's copy holds the same values).
#pragma once
#include <string>
#include <vector>

#include "core/dist/communicator.h"
#include "core/engine/model_state.h"
#include "core/engine/weight_init.h"
#include "core/io/weight_files.h"
#include "core/graph/parallel_layout.h"
#include "core/model/model_config.h"

#include "core/util/output_file.h"

namespace remat {

// Where a rank of `whole` split over `tp` tensor-parallel ranks sits: its index t, its
// communicators (null: none).
struct RankPlace {
  int tp = 1, t = 0;
  Communicator* tp_comm = nullptr;  // the T ranks of the replica
  Communicator* comm = nullptr;     // the D replicas holding the same slice
  // Pipeline stages: the layout (its pp, stage layers and tp; null: one stage), this rank's
  // stage and the P stages of its replica and tensor rank.
  const ParallelLayout* stages = nullptr;
  int stage = 0;
  Communicator* pp_comm = nullptr;
};

// The values `runs` name, taken from `global` (laid out as `layout`), in a buffer of n elements
// (zeros where no run lands).
std::vector<float> take_runs(const ParamLayout& layout, const std::vector<WeightRun>& runs,
                             const std::vector<float>& global, std::int64_t n);

// The whole model's flat vector from the T tensor-parallel ranks' own (ranks[t] in rank t's
// layout): the inverse of rank_weight_slices. What every rank holds whole (norms, embeddings,
// the head, row-parallel biases) is taken from rank 0.
std::vector<float> whole_from_rank_slices(const ModelConfig& whole, int tp,
                                          const std::vector<std::vector<float>>& ranks);

// The files' parameters (the whole model's) as this rank holds them: its tensor-parallel slices,
// of those its ZeRO-3 shard; written into the state.
void load_rank_weights(const WeightFiles& files, ModelState& state, const ModelConfig& whole,
                       const RankPlace& place);

// The whole model's parameters (or, with grads, the gradients the last optimizer step read)
// gathered from the ranks; every rank calls it. Rank 0 of the job gets the flat vector in the
// whole model's layout, every other rank an empty one. The collectives are not a step's: their
// records are dropped from the communicators, so the per-step traffic stays the steps'.
std::vector<float> gather_whole(const ModelState& state, const ModelConfig& whole, const RankPlace& place,
                                bool grads);

// gather_whole, then rank 0 writes `path` (write_weights: one file, or shards of shard_bytes).
void save_rank_file(const std::string& path, const ModelState& state, const ModelConfig& whole,
                    const RankPlace& place, bool grads, std::uint64_t shard_bytes = 0, const InputFiles& inputs = {},
                    const std::string& what = {});

}  // namespace remat
