// Checkpoint plans predicted from a recorded PyTorch step (a run directory written by the
// Python package's rematlab.record, summary.json `source: "pytorch"`): which saved tensors a
// plan drops and which inputs it keeps instead, from saved_tensors.csv and module_calls.csv,
// without running the model. The plan syntax is the one rematlab.checkpoint_plan applies
// (docs/batch.md, plan --from-run).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace remat {

struct RecordedTensor {
  std::string module;
  int block = -1;
  std::uint64_t storage = 0, storage_bytes = 0;
  bool parameter = false;  // aliases a parameter: not an activation
  bool held_at_backward = false;
};

struct RecordedCall {
  std::string module;
  int block = -1;
  bool forward = false;  // the first forward (not a recompute in backward)
  std::optional<std::uint64_t> flops;  // the profiler's FLOPs of its ops; none: unknown
  std::vector<std::pair<std::uint64_t, std::uint64_t>> inputs;  // (storage, bytes) of its tensor arguments
};

struct RecordedRun {
  int blocks = 0;              // children of the first ModuleList
  std::string blocks_module;   // its path
  std::uint64_t saved_bytes = 0;  // summary.json recorded.saved_bytes_at_backward
  bool flops_known = false;
  std::vector<RecordedTensor> tensors;
  std::vector<RecordedCall> calls;
};

// Reads DIR/summary.json, saved_tensors.csv and module_calls.csv; Error naming the file (and the
// line and column) when DIR is not a recorded run or a table is off.
RecordedRun read_recorded_run(const std::string& dir);

struct CheckpointPlanSpec {
  enum class Kind { PerBlock, Every, Segments, Sqrt, Modules } kind = Kind::PerBlock;
  int k = 0;
  std::vector<std::string> globs;
  std::string text;
};
// per-block | every:K | segments:K | sqrt | modules:GLOB[,GLOB]; Error saying the syntax.
CheckpointPlanSpec parse_checkpoint_plan(const std::string& text);
// The checkpointed segments (first, last) of a block plan over `blocks` blocks.
std::vector<std::pair<int, int>> plan_regions(const CheckpointPlanSpec& p, int blocks);

struct RecordedPrediction {
  std::vector<std::string> checkpointed;   // module paths run under a checkpoint
  std::uint64_t recorded_saved_bytes = 0;  // held for backward in the recorded step
  std::uint64_t saved_bytes = 0;           // ... predicted under the plan
  std::vector<std::uint64_t> saved_bytes_per_block;  // predicted, by block (-1 left out)
  std::optional<std::uint64_t> recompute_flops;      // none: the profiler gave none
  std::uint64_t recomputed_blocks = 0;
};

RecordedPrediction predict_recorded_plan(const RecordedRun& run, const CheckpointPlanSpec& plan);

}  // namespace remat
