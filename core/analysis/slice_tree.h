// The op timeline as nested slices, as a trace viewer shows them: per stream a track of its ops,
// and on the compute stream the levels step > phase > block > op > kernel above one another.
// A step slice is the counted step (Trace::step_stats); a phase slice a maximal run of compute
// ops of one phase; a block slice a maximal run of one block inside a phase (ops outside the
// blocks have none); an op slice one executor op — on CUDA the kernels sharing an op_id, on the
// CPU each OpRecord, which is then the leaf; a kernel slice (CUDA only) one kernel.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/analysis/downsample.h"
#include "core/trace/trace.h"

namespace remat {

enum class SliceLevel : std::uint8_t { Step, Phase, Block, Op, Kernel };
const char* to_string(SliceLevel l);

struct Slice {
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  std::int64_t start = 0, end = 0;
  std::uint32_t first = 0, last = 0;  // its ops: SliceTree::stream_ops(stream)[first, last)
  // Compute stream: the enclosing slice — a phase's step, a block's or an op's phase, a kernel's
  // op — as an index into that level's track; kNone on other streams and for steps.
  std::uint32_t parent = kNone;
  Phase phase = Phase::Forward;
  std::int32_t block = -1;
  std::int32_t step = 0;
};

struct SliceTrack {
  Stream stream = Stream::Compute;
  SliceLevel level = SliceLevel::Op;
  std::vector<Slice> slices;  // by start; slices of one track never overlap on the compute stream
  std::uint32_t depth = 0;    // other streams: how many ops its ops run inside (core/trace/records.h nests_in)
};

class SliceTree {
 public:
  SliceTree() = default;
  explicit SliceTree(const Trace& t);

  // Compute levels first (step, phase, block, op[, kernel]), then the tracks of each other
  // stream, outermost first (one per stream unless its ops nest).
  const std::vector<SliceTrack>& tracks() const { return tracks_; }
  // Indices into Trace::ops of the stream's records, by start time.
  const std::vector<std::uint32_t>& stream_ops(Stream s) const { return by_stream_[static_cast<int>(s)]; }
  bool has_kernels() const { return kernels_; }
  // The track of the leaf slices of a stream (kernel or op level on compute), -1 when none.
  int leaf_track(Stream s) const;
  // The leaf slice of op `op` (index into Trace::ops): {track, slice}, {-1, -1} when unknown.
  std::pair<int, int> leaf_of(std::uint32_t op) const;
  // Rows for drawing: one per track, Span::index the slice, Span::color its phase (kNumPhases
  // for steps, which have none).
  SpanRows span_rows() const;

  // The whole model's index of the trace's block 0: a pipeline stage's blocks are named by it.
  int first_block() const { return first_block_; }
  // Display name: "step 3", "backward", "block 2", the op's name, the kernel's name; a pipeline
  // stage's blocks and the ops in them as the whole model numbers them ("h2.attn" for its block 0).
  std::string name(const Trace& t, int track, int slice) const;
  // FLOPs and bytes of the slice's ops.
  std::uint64_t flops(const Trace& t, int track, int slice) const;
  std::uint64_t bytes(const Trace& t, int track, int slice) const;

 private:
  // Adds the one-slice-per-op track `all` of a stream other than compute, split by depth where
  // its ops nest.
  void nest(const Trace& t, SliceTrack all);

  std::vector<SliceTrack> tracks_;
  std::vector<std::uint32_t> by_stream_[kNumStreams];
  std::vector<std::uint32_t> pos_;  // Trace::ops index -> position in its stream's order
  // Trace::ops index -> {track, slice} for the ops of streams with nested tracks; {-1, -1} else.
  std::vector<std::pair<int, int>> nested_leaf_;
  bool kernels_ = false;
  int first_block_ = 0;  // the whole model's index of the trace's block 0 (block_names.h)
};

// Bytes allocated and freed by ops, from the step's memory events attributed by op id
// (MemoryEvent::op_seq: the op running, or about to begin, when the event happened).
struct OpMemory {
  std::uint64_t allocated = 0, freed = 0;
  std::uint64_t allocations = 0, frees = 0;
};

class OpMemoryIndex {
 public:
  OpMemoryIndex() = default;
  explicit OpMemoryIndex(const Trace& t);
  // Events of ops with first <= op_id <= last.
  OpMemory between(std::uint64_t first_op_id, std::uint64_t last_op_id) const;

 private:
  std::vector<std::uint64_t> ids_;  // sorted op_seq
  std::vector<OpMemory> prefix_;    // prefix_[i]: sums of the first i events by op_seq
};

}  // namespace remat
