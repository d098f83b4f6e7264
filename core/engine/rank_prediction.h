// The memory of one rank of a tensor/sequence/pipeline/data-parallel step, predicted: the
// static bytes of each pipeline stage's rank (parameters, gradients, fp32 master weights and
// AdamW moments, as the model's own accounting, divided by T and P and by D per ZeRO stage) and
// each stage's activations under 1F1B (stage i holds min(P − i, N) micro-batches), from the
// simulator's walk of one micro-batch over the per-rank block table (parallel_layout.h), which
// under ZeRO-2 and 3 allocates the gradient buckets and gathered parameters a run does.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/engine/simulator.h"
#include "core/graph/parallel_layout.h"

namespace remat {

// Static bytes of one rank, by category.
struct RankStatic {
  std::uint64_t param_elements = 0;  // the parameters this rank's stage and tensor slice hold
  std::uint64_t parameters = 0, gradients = 0, master_weights = 0, optimizer_state = 0;
  std::uint64_t total() const { return parameters + gradients + master_weights + optimizer_state; }
};

// Parameter elements of stage `stage`'s rank: its blocks with column-parallel weights and
// biases, row-parallel weights and tensor-region norm weights split over T (row-parallel
// biases and sequence-region norms replicated, as the block table's regions say); the word
// embedding on the first stage (and its tied copy, or the output layer, on the last), the
// learned positions on the first, the final norm on the last, each replicated over T (a run
// holds them whole on every tensor-parallel rank: no vocabulary-parallel embedding yet).
std::uint64_t rank_param_elements(const ModelConfig& m, const ParallelLayout& p, int stage);
// Its bytes: parameters and gradients in the model's dtype, fp32 master weights (16-bit models)
// and two fp32 moments; ZeRO-1 divides the master weights and moments by D, ZeRO-2 the
// gradients too, ZeRO-3 the parameters too (each rank's part of the flat buffer, rounded up).
RankStatic rank_static(const ModelConfig& m, const ParallelLayout& p, int stage);

// One micro-batch over one stage's per-rank blocks, simulated (its embedding and head outside
// the blocks counted on every stage, at the full model's sizes).
struct MicroBatchPrediction {
  int blocks = 0;
  std::vector<int> kinds;  // per block its table and window (stage_block_kinds): stages alike in both share one
  Schedule schedule;
  Prediction sim;
  std::uint64_t held_bytes = 0;  // what its blocks hold after the forward sweep
};

struct StagePrediction {
  int stage = 0;
  int blocks = 0;                 // the stage's (L/P unless the first or last differs)
  int in_flight = 1;              // micro-batches whose activations the stage holds at once
  int micro_batch = 0;            // index into RankPrediction::micro_batch
  RankStatic statics;
  std::uint64_t activation_bytes = 0;  // (in_flight − 1) × held + one micro-batch's working set
  std::uint64_t peak_bytes = 0;        // static + activations + the rest (workspace, gradients, ...)
  // What one micro-batch holds on this stage from its forward to its backward: its blocks' saved
  // bytes (MicroBatchPrediction::held_bytes) and what outside the blocks it keeps (the first
  // stage's embedding dropout mask). With one stage, the blocks' bytes.
  std::uint64_t held_bytes = 0;
  // For a CUDA target, what the stage's caching allocator reserves (Prediction::reserved_bytes),
  // from the same walk as the peak; 0 for other targets.
  std::uint64_t reserved_bytes = 0;
  std::uint64_t rounded_peak_bytes = 0;  // Prediction::rounded_peak_bytes, the same way
  // The rest of the activations: one micro-batch's forward, recomputes and backward on top of
  // what the others hold.
  std::uint64_t working_set_bytes() const {
    const std::uint64_t waiting = static_cast<std::uint64_t>(in_flight - 1) * held_bytes;
    return activation_bytes > waiting ? activation_bytes - waiting : 0;
  }
};

struct RankPrediction {
  ParallelLayout layout;
  int micro_batches = 1;
  std::vector<MicroBatchPrediction> micro_batch;  // one per distinct stage size
  std::vector<StagePrediction> stages;
  int peak_stage = 0;
  std::uint64_t peak_bytes = 0;  // the highest stage's
};

// Distributed checkpoints (Megatron's --distribute-saved-activations) split the inputs of blocks
// recomputed in full: every block of the schedule but the last keeps its input or nothing.
// ConfigError naming the policy and the block otherwise.
void check_distributed_schedule(const Schedule& s, int blocks);

// Plans a schedule for one stage's per-rank block table (a policy plugin, or a fixed schedule).
using StagePlanner = std::function<Schedule(const BlockGraph&)>;

// Checks the layout (validate_layout) and, with distributed checkpoints, that each schedule
// recomputes every block but the last from its input (Megatron distributes only those): Error.
RankPrediction predict_ranks(const ModelConfig& m, const ParallelLayout& p, const StagePlanner& plan,
                             const Backend* mirror);

// What a block keeps for its backward in the paper's strategies (each with or without sp); of
// one table (a model with several, e.g. dense and expert layers, asks each block's own).
enum class Strategy : std::uint8_t { Store, Selective, Full };
// Store: the whole saved set; Selective: without the block's default selective set; Full: the
// block input only (its checkpoint).
std::uint64_t layer_activation_bytes(const BlockGraph& rank_graph, Strategy s);

// The first pipeline stage's block activations under the five strategies of Korthikanti et al.
// 2022 (Figure 7) for the layout's T and P: tensor-parallel baseline, + sequence parallel,
// + selective recomputation, + both, full recomputation (block inputs only, not distributed).
// first_stage_bytes = min(P, N) micro-batches in flight × the stage's blocks × layer_bytes; the
// embedding and output layer are not counted. percent: of the baseline's.
struct StrategyRow {
  std::string name;
  bool sp = false;
  Strategy strategy = Strategy::Store;
  std::uint64_t layer_bytes = 0, first_stage_bytes = 0;
  double percent = 0.0;
};
std::vector<StrategyRow> paper_strategies(const ModelConfig& m, const ParallelLayout& base);

}  // namespace remat
