#include "core/engine/simulator.h"

#include <algorithm>

#include "core/backend/cuda_sizing.h"
#include "core/backend/null/null_backend.h"
#include "core/engine/executor.h"
#include "core/engine/model_state.h"
#include "core/engine/pipeline_stage.h"
#include "core/graph/block_graph.h"

namespace remat {

std::uint64_t activation_peak(const std::vector<MemoryEvent>& events, std::size_t from) {
  std::int64_t live = 0, peak = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const MemoryEvent& e = events[i];
    if (e.space != Space::Device || !is_activation(e.category)) continue;
    live += e.delta;
    if (i >= from) peak = std::max(peak, live);
  }
  return static_cast<std::uint64_t>(peak);
}

Prediction simulate(const ModelConfig& m, const Schedule& s, const Backend* mirror) {
  return simulate(BlockGraph(m), s, mirror);
}

Prediction simulate(const BlockGraph& g, const Schedule& s, const Backend* mirror) {
  return simulate(g, s, mirror, 1, false);
}

Prediction simulate(const BlockGraph& g, const Schedule& s, const Backend* mirror, int tp, bool sp) {
  return simulate(g, s, mirror, tp, sp, 0, 1);
}

namespace {

struct StageSim {
  int stages = 1, stage = 0, micro_batches = 1, first_block = 0, model_blocks = 0;
  LayoutParts parts;
  bool tied = false;
};

Prediction walk(const BlockGraph& g, const Schedule& s, const Backend* mirror, int tp, bool sp, int zero,
                int dp, bool distribute, const StageSim& pipe) {
  const ModelConfig& m = g.config();
  Prediction p;
  p.plan = validate_schedule(s, g);
  NullBackend be(mirror);
  LogicalClock clock;
  TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
  // A stage's table (per_rank_graph) numbers its blocks from its first: its parameters and the
  // executor's windows and RoPE bases are those blocks', also when one micro-batch of it is
  // simulated alone.
  const int first = pipe.stages > 1 ? pipe.first_block : g.first_block();
  LayoutParts parts = pipe.parts;
  parts.first_block = first;
  ModelState state(m, be, alloc, make_zero_shard(zero, dp, 0, 0), parts);
  p.static_bytes = state.static_bytes();
  p.workspace_bytes = state.workspace.bytes();
  NullCommunicator tp_comm(0, tp);
  ExecOptions eo;
  if (tp > 1) eo.tp_comm = &tp_comm;
  NullCommunicator dp_comm(0, dp);
  if (dp > 1) eo.comm = &dp_comm;
  eo.sp = sp;
  eo.distribute_saved = distribute;
  NullCommunicator pp_comm(pipe.stage, pipe.stages);
  NullCommunicator tie_comm(pipe.stage == 0 ? 0 : 1, 2);
  if (pipe.stages > 1) {
    eo.pp_comm = &pp_comm;
    if (pipe.tied && (pipe.parts.embedding || pipe.parts.head)) eo.tie_comm = &tie_comm;
    eo.micro_batches = pipe.micro_batches;
  }
  eo.first_block = first;
  eo.model_blocks = pipe.model_blocks;
  Executor ex(state, be, alloc, nullptr, eo, g);
  const std::vector<std::int32_t> none;  // the null backend reads no tokens (Executor::run_step)
  StepOutput out = ex.run_step(s, 0, none, none);
  p.peak_bytes = alloc.peak_device();
  p.flops = {out.flops_forward, out.flops_recompute, out.flops_backward, out.flops_other};
  p.block_forwards = out.block_forwards;
  p.saved_bytes_per_block = out.saved_bytes_per_block;
  p.held_after_forward_bytes = out.held_after_forward;
  p.activation_peak_bytes = activation_peak(alloc.events(), out.first_event);
  // Device bytes per category at the peak, and the host high-water mark.
  p.peak_by_category.assign(kNumCategories, 0);
  std::vector<std::int64_t> cat(kNumCategories, 0);
  std::int64_t host = 0, host_peak = 0;
  const auto& ev = alloc.events();
  for (std::size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].space == Space::Host) {
      host += ev[i].delta;
      host_peak = std::max(host_peak, host);
      continue;
    }
    cat[static_cast<int>(ev[i].category)] += ev[i].delta;
    if (i == alloc.peak_event())
      for (int c = 0; c < kNumCategories; ++c) p.peak_by_category[c] = static_cast<std::uint64_t>(cat[c]);
  }
  p.host_peak_bytes = static_cast<std::uint64_t>(host_peak);
  p.events = ev.size() - out.first_event;
  if (mirror && mirror->name() == "cuda") {
    const CudaPoolBytes pool = cuda_pool_bytes(ev);
    p.reserved_bytes = pool.reserved;
    p.rounded_peak_bytes = pool.rounded_peak;
  }
  return p;
}

}  // namespace

Prediction simulate(const BlockGraph& g, const Schedule& s, const Backend* mirror, int tp, bool sp,
                    int zero, int dp) {
  return walk(g, s, mirror, tp, sp, zero, dp, false, StageSim{});
}

Prediction simulate(const BlockGraph& g, const Schedule& s, const Backend* mirror, const ParallelLayout& p) {
  return walk(g, s, mirror, p.tp, p.sp, p.zero, p.dp, p.distribute_saved_activations, StageSim{});
}

Prediction simulate_stage(const ModelConfig& m, const ParallelLayout& p, int stage, const Schedule& s,
                          const Backend* mirror) {
  return simulate_stage_order(m, p, stage, s, mirror, p.pp, stage, p.micro_batches_of(m));
}

Prediction simulate_stage_order(const ModelConfig& m, const ParallelLayout& p, int stage, const Schedule& s,
                                const Backend* mirror, int order_stages, int order_stage, int micro_batches) {
  const StageCut c = stage_cut(m, p, stage);
  StageSim pipe;
  pipe.stages = order_stages;
  pipe.stage = order_stage;
  pipe.micro_batches = micro_batches;
  pipe.first_block = c.first_block;
  pipe.model_blocks = m.layers;
  pipe.parts = c.parts;
  pipe.tied = m.tied_embeddings;
  return walk(per_rank_graph(m, p, stage), s, mirror, p.tp, p.sp, p.zero, p.dp, p.distribute_saved_activations,
              pipe);
}

}  // namespace remat
