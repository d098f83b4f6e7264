// Megatron-LM tensor parallelism on one rank: the model a rank holds (tensor_rank_model), its
// weights as slices of the single-process initialization, the checks a run needs, and where a
// rank's dropout masks lie in the single-process masks. The collectives themselves run in the
// executor (executor_tp.cpp), around the linears block_regions() marks column- or row-parallel.
#pragma once
#include <cstdint>
#include <vector>

#include "core/backend/backend.h"
#include "core/dist/communicator.h"
#include "core/engine/weight_init.h"
#include "core/graph/parallel_layout.h"
#include "core/util/philox.h"

namespace remat {

// Tensor-parallel index and count of a communicator (0 and 1 without one).
int tp_rank_of(const Communicator* c);
int tp_size_of(const Communicator* c);

// Refuses what a tensor-parallel run cannot do, before any process starts: the layout's own
// checks (validate_layout), pipeline stages (plan predicts them; runs do not), a model whose
// rank does not hold exactly the parameters rank_param_elements counts (weights inside the
// parallel region that are not split with the heads; QK-norm's are, each rank holding its
// heads' slice), and bf16 (the sums are fp32). ConfigError naming the field.
void check_tensor_parallel(const ModelConfig& m, const ParallelLayout& p);

// Rank t's parameters in its layout (ParamLayout(tensor_rank_model(m, T))), cut from `global`,
// the whole model's in its layout: column-parallel weights and biases their output rows
// [t·n/T, (t+1)·n/T) of each fused part (q|k|v, gate|up), row-parallel weights their input
// columns [t·k/T, (t+1)·k/T), everything else whole.
std::vector<float> rank_weight_slices(const ModelConfig& m, int tp, int t, const std::vector<float>& global);

// Where rank_weight_slices cuts: for each part of rank t's parameters, the whole model's
// parameter (its index in ParamLayout(m)), the elements taken and where they go in the rank's
// buffer.
std::vector<WeightRun> rank_weight_runs(const ModelConfig& m, int tp, int t);

// Rank t's parameters drawn directly (only its slices, on `threads` threads): the bits of
// rank_weight_slices over init_weight_values(ParamLayout(m), m.layers, seed, ...).
std::vector<float> rank_weight_values(const ModelConfig& m, int tp, int t, std::uint64_t seed, int threads);

// The key of rank t's mask at a dropout site of a block (`key` the single-process one, offset
// already at the replica's slice): the attention probabilities' heads [t·a/T, (t+1)·a/T) of each
// batch row; with sp, the sequence region's residual masks rows [t·B·S/T, (t+1)·B·S/T).
DropoutKey tp_dropout_key(DropoutKey key, const ModelConfig& full, DropoutSite site, int tp, int t, bool sp);

}  // namespace remat
