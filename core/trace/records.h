// Plain records a run produces: ops and kernels, schedule actions, ledger rows, step figures.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/memory/categories.h"

namespace remat {

// Streams as the views show them. Comm: the collectives between ranks (format version 3 on).
enum class Stream : std::uint8_t { Compute = 0, CopyToHost = 1, CopyToDevice = 2, Host = 3, Comm = 4 };
inline constexpr int kNumStreams = 5;
const char* to_string(Stream s);

// One op (CPU) or kernel / memcpy / memset (CUDA) on one stream.
struct OpRecord {
  std::int64_t start_ns = 0, end_ns = 0;  // on the run's clock
  Stream stream = Stream::Compute;
  std::string name;    // kernel or op instance name, e.g. "h3.mlp.fc" or "gemm_bf16_128x128"
  std::string op;      // the step it belongs to: "mlp.fc", "head", "adamw", "offload", ...
  std::int32_t block = -1;
  Phase phase = Phase::Forward;
  std::int32_t step = 0;
  std::uint64_t flops = 0;
  std::uint64_t bytes = 0;
  std::uint64_t op_id = 0;  // the executor's id of the op (CUPTI external correlation id)
  // A collective (stream Comm): the global ranks of its group, ascending. Empty for other ops.
  std::vector<std::int32_t> ranks;
};

// Whether an op [cs, ce] that starts at or after an op [ps, pe] on the same thread runs inside
// it, as profilers write nested ops: it starts before the other ends, or, where times are whole
// microseconds (torch's legacy profiler), it is an instant at the other's very end.
template <class T>
constexpr bool nests_in(T ps, T pe, T cs, T ce) {
  return cs < pe || (cs == pe && ce == cs && pe > ps);
}

// OpRecord::ranks as ops.csv writes it: "0 1" (empty for none).
std::string ranks_text(const std::vector<std::int32_t>& ranks);
// The ranks of `s` ("0 1": decimal ranks 0 to 2^20 - 1, ascending, one space apart). Returns
// false and says why in `why` for anything else.
bool parse_ranks(std::string_view s, std::vector<std::int32_t>& out, std::string& why);

struct StepStats {
  int step = 0;
  bool counted = true;
  double loss = 0.0;
  double time_ms = 0.0;
  std::uint64_t peak_bytes = 0;      // tracked device bytes, highest in this step
  std::uint64_t reserved_bytes = 0;  // device bytes held from the system at the peak
  std::int64_t start_ns = 0, end_ns = 0;
};

// What became of a saved tensor (LedgerEntry::decision), every value the executor writes.
inline constexpr std::array<const char*, 5> kLedgerDecisions = {"kept", "checkpoint", "offloaded",
                                                                "discarded", "recomputed"};
// The schedule record of the fused head (final norm, logits, loss and their backward).
inline constexpr const char* kHeadAction = "head";

struct LedgerEntry {
  int block = -1;
  std::string tensor;
  std::uint64_t bytes = 0;
  std::int64_t created_ns = 0, freed_ns = 0;
  Phase created = Phase::Forward;
  Category category = Category::SavedActivations;
  std::string decision;  // kept | checkpoint | offloaded | discarded | recomputed
  std::uint64_t alloc_id = 0, free_id = 0;  // first and last allocation ids in memory_events
  // Why, in words and figures (engine/ledger_why.h): what rebuilding a kept tensor would run
  // again, what rebuilt a recomputed one. Empty from files before version 5 and from recordings.
  std::string why;
};

struct ScheduleRecord {
  std::size_t index = 0;
  std::string action;  // forward | recompute | backward | offload | prefetch | drop | head | ...
  int block = -1;
  std::string keep;
  Phase phase = Phase::Forward;
  std::int64_t start_ns = 0, end_ns = 0;
  int step = 0;
};

// What a mixture-of-experts layer's router did with one micro-batch (the last counted step):
// the (token, choice) pairs that chose `expert` and those its capacity kept (all of them when
// routing is dropless). `layer` is the whole model's block index (format version 6 on).
struct RoutingRecord {
  std::int32_t micro_batch = 0, layer = 0, expert = 0;
  std::uint64_t routed = 0, kept = 0;
  bool operator==(const RoutingRecord&) const = default;
};

}  // namespace remat
