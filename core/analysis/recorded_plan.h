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
  // When autograd saved it, first unpacked it and released it (ns from the step's start; -1:
  // never), which the peak's replay reads (recorded_peak.h).
  std::int64_t packed_ns = 0, unpacked_ns = -1, released_ns = -1;
};

struct RecordedCall {
  std::string module;
  int block = -1;
  bool forward = false;  // the first forward (not a recompute in backward)
  std::optional<std::uint64_t> flops;  // the profiler's FLOPs of its ops; none: unknown
  std::vector<std::pair<std::uint64_t, std::uint64_t>> inputs;  // (storage, bytes) of its tensor arguments
  std::int64_t start_ns = 0, end_ns = 0;
};

// An allocation or free the recorder tracked (memory_events.csv): parameters, gradients,
// optimizer state, and the storages held for backward (saved activations and checkpoints).
struct RecordedEvent {
  std::int64_t t_ns = 0;
  std::int64_t delta = 0;
  bool activation = false;  // saved_activations or checkpoints
};

// An output of a classed op of the forward (op_outputs.csv): an op of an op class of
// python/rematlab/op_classes.py, e.g. aten::linear of class matmul.
struct RecordedOutput {
  std::string op, module;
  int block = -1;
  std::uint64_t storage = 0, storage_bytes = 0;
};

// A top-level op of the first forward (ops.csv, phase forward) with the profiler's FLOPs.
struct RecordedOp {
  std::string name, module;
  std::uint64_t flops = 0;
};

struct RecordedRun {
  int blocks = 0;              // children of the first ModuleList
  std::string blocks_module;   // its path
  std::uint64_t saved_bytes = 0;  // summary.json recorded.saved_bytes_at_backward
  bool flops_known = false;
  std::vector<RecordedTensor> tensors;
  std::vector<RecordedCall> calls;
  // Selective plans: the op classes the recording was made with (summary.json
  // recorded.op_classes: class -> aten op names), the classed ops' outputs and the forward's
  // ops. A recording made before op classes has none (has_op_outputs false).
  bool has_op_outputs = false;
  std::vector<std::pair<std::string, std::vector<std::string>>> op_classes;
  std::vector<RecordedOutput> outputs;
  std::vector<RecordedOp> forward_ops;
  // memory_events.csv in its order, and summary.json's peak_bytes (the recorded step's peak of
  // what the events track).
  std::vector<RecordedEvent> events;
  std::uint64_t peak_bytes = 0;
};

// Reads DIR/summary.json, saved_tensors.csv, module_calls.csv and memory_events.csv, and op_outputs.csv and ops.csv
// where summary.json lists op classes; Error naming the file (and the line and column) when DIR
// is not a recorded run, is of a newer format, or a table is off.
RecordedRun read_recorded_run(const std::string& dir);

struct CheckpointPlanSpec {
  // the regions (None: nothing checkpointed, the step as recorded)
  enum class Kind { None, PerBlock, Every, Segments, Sqrt, Modules } kind = Kind::PerBlock;
  int k = 0;
  std::vector<std::string> globs;
  std::vector<std::string> keep;  // selective: the op classes whose outputs are saved; empty: plain
  std::string text;
};
// none | per-block | every:K | segments:K | sqrt | modules:GLOB[,GLOB] | selective:keep=CLASS[,CLASS][@PLAN]
// (PLAN one of the others, per-block when left out); Error saying the syntax. The class names
// are checked against the recording's op classes by predict_recorded_plan.
CheckpointPlanSpec parse_checkpoint_plan(const std::string& text);
// The checkpointed segments (first, last) of a block plan over `blocks` blocks (segments:K: K
// segments whose lengths differ by at most one, the longer first; Error past `blocks`).
std::vector<std::pair<int, int>> plan_regions(const CheckpointPlanSpec& p, int blocks);

struct RecordedPrediction {
  std::vector<std::string> checkpointed;   // module paths run under a checkpoint
  std::uint64_t recorded_saved_bytes = 0;  // held for backward in the recorded step
  std::uint64_t saved_bytes = 0;           // ... predicted under the plan
  std::vector<std::uint64_t> saved_bytes_per_block;  // predicted, by block (-1 left out)
  std::optional<std::uint64_t> recompute_flops;      // none: the profiler gave none
  std::uint64_t recomputed_blocks = 0;
  // Selective plans: the kept ops' output bytes inside the regions (storages not held otherwise),
  // the forward ops recomputed, and how many of them the profiler gave no FLOPs (0: a FLOP count
  // it does not make, e.g. softmax, layer norm).
  std::uint64_t kept_output_bytes = 0;
  std::uint64_t recomputed_ops = 0, recomputed_ops_without_flops = 0;
  // The step's peak of tracked memory under the plan (recorded_peak.h); none for a selective
  // plan (the kept outputs' lifetimes are not recorded).
  std::uint64_t recorded_peak_bytes = 0;              // the recorded step's
  std::optional<std::uint64_t> held_peak_bytes;       // what a recording of the planned step measures
  std::optional<std::uint64_t> peak_bytes;            // ... with the recomputed tensors
};

RecordedPrediction predict_recorded_plan(const RecordedRun& run, const CheckpointPlanSpec& plan);

}  // namespace remat
