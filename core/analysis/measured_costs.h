// The budget planner's step costs from a measured run instead of FLOPs: for each step of the
// block table, the mean over blocks of the time its forward took in the run's last counted step
// (every kernel and copy of the step summed), in ns. `rematlab-batch plan|run|sweep
// --costs-from RUN_DIR` passes them to PolicyRegistry::plan.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/graph/block_graph.h"
#include "core/model/model_config.h"
#include "core/plugin/registry.h"
#include "core/trace/records.h"
#include "core/trace/trace.h"

namespace remat {

// Throws Error when the run's model differs from the planned one in a field that changes the
// block table or its steps' sizes (architecture, layers, hidden, heads, kv heads, ffn, vocab,
// seq, batch, attention, dtype, dropout on or off), naming the field, the run's value and the
// plan's.
void check_same_blocks(const ModelConfig& run, const ModelConfig& plan);

// Per step of `steps` (table order): over the forward-phase records with block >= 0 whose op is
// the step's name, the durations (end_ns - start_ns) summed per block, then averaged over the
// blocks that have any. A step without records costs 0 when its flops_fwd is 0 or `unrun`
// marks it (a step of the first table that no block of the model runs: layers without RoPE
// only); otherwise Error names every such step.
std::vector<double> step_costs_from_ops(const std::vector<OpRecord>& ops,
                                        const std::vector<StepDef>& steps,
                                        const std::vector<bool>& unrun = {});

// The costs of g's steps measured in `t` (its ops: the last counted step). Refuses an
// incomplete run, a run without op records and a run of a different model (check_same_blocks
// against g.config()). Throws Error.
std::vector<double> measured_step_costs(const Trace& t, const BlockGraph& g);

// The provenance key of a run planned with measured costs; its value is their unit.
inline constexpr const char* kPlannerCostsKey = "planner_costs";

// The step costs of `m`'s blocks measured in the run directory `dir`, with their unit ("ns
// measured on DEVICE in DIR"). Throws Error saying what is wrong (not a run directory, a sweep
// directory, another model, missing steps), without naming the directory.
StepCosts step_costs_from_run_dir(const std::string& dir, const ModelConfig& m);

// Records the unit of measured costs in the trace's provenance (nothing for FLOPs).
void add_costs_provenance(Trace& t, const std::optional<StepCosts>& costs);

}  // namespace remat
