// Predicts a schedule's memory and FLOPs without computing anything: the executor's own walk
// over the null backend (virtual memory, no arithmetic), so every allocation the real run makes
// is predicted in the same order with the same size. Plans configurations far too big to run.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/graph/block_graph.h"
#include "core/graph/parallel_layout.h"
#include "core/memory/tracking_allocator.h"
#include "core/model/model_config.h"
#include "core/schedule/schedule.h"
#include "core/schedule/validator.h"
#include "core/trace/trace.h"

namespace remat {

struct Prediction {
  std::uint64_t peak_bytes = 0;            // device, everything included
  std::uint64_t static_bytes = 0;          // parameters, gradients, master weights, moments
  std::uint64_t workspace_bytes = 0;
  std::uint64_t activation_peak_bytes = 0; // saved + checkpoints + recompute temporaries
  std::uint64_t host_peak_bytes = 0;
  FlopCounts flops;
  std::uint64_t block_forwards = 0;
  ScheduleStats plan;
  std::vector<std::uint64_t> saved_bytes_per_block;
  std::uint64_t held_after_forward_bytes = 0;   // a stage's: StepOutput::held_after_forward
  std::vector<std::uint64_t> peak_by_category;  // device bytes per category at the peak
  std::size_t events = 0;                       // memory events the step records
  // For a CUDA target (mirror named "cuda"): what its caching allocator reserves from the
  // driver over the whole walk, and the most its live blocks take rounded to their size classes
  // (cuda_sizing.h: CudaPoolBytes); else 0.
  std::uint64_t reserved_bytes = 0, rounded_peak_bytes = 0;
};

// `mirror` is the backend the prediction is for (its workspace size); null means none.
// Throws ScheduleError for an illegal schedule.
Prediction simulate(const ModelConfig& m, const Schedule& s, const Backend* mirror);
// The same over a given block table (`graph.config()` is the model).
Prediction simulate(const BlockGraph& graph, const Schedule& s, const Backend* mirror);
// One of `tp` tensor-parallel ranks (sequence-parallel with sp): `graph` is the per-rank block
// table (per_rank_graph), its config the rank's model; the exchanges allocate as a run's do.
Prediction simulate(const BlockGraph& graph, const Schedule& s, const Backend* mirror, int tp, bool sp);
// And one of `dp` data-parallel ranks under ZeRO stage `zero` (zero_shard.h): its shards, and
// the gathered parameters and gradient buckets a run allocates (every rank allocates the same).
Prediction simulate(const BlockGraph& graph, const Schedule& s, const Backend* mirror, int tp, bool sp,
                    int zero, int dp);
// One rank of layout p without stages (its tp, sp, zero, dp and distributed checkpoints).
Prediction simulate(const BlockGraph& graph, const Schedule& s, const Backend* mirror, const ParallelLayout& p);

// One rank of pipeline stage `stage` of the layout (m.batch the micro-batch, m the whole model
// otherwise; p valid for m): the stage's own parameters (stage_cut), its per-rank block
// table (per_rank_graph), every micro-batch of a step in the stage's 1F1B order, with null
// communicators of the layout's sizes (pipeline, tensor, data and, tied, the embedding's pair).
Prediction simulate_stage(const ModelConfig& m, const ParallelLayout& p, int stage, const Schedule& s,
                          const Backend* mirror);

// Stage `stage`'s rank (its parameters, block table and role: embedding, head) walked in the
// 1F1B order of stage `order_stage` of `order_stages` with `micro_batches` micro-batches, the
// pipeline communicator of that size: a short walk with the stage's warm-up forwards
// (order_stages − order_stage − 1) from which plan predicts a stage of a long pipeline
// (rank_prediction.cpp). The order must keep the stage's role: order_stage 0 for the first stage,
// order_stages − 1 for the last, neither for the others.
Prediction simulate_stage_order(const ModelConfig& m, const ParallelLayout& p, int stage, const Schedule& s,
                                const Backend* mirror, int order_stages, int order_stage, int micro_batches);

// Replays events and returns the highest total of the activation categories on the device.
std::uint64_t activation_peak(const std::vector<MemoryEvent>& events, std::size_t from = 0);

}  // namespace remat
