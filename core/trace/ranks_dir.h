// A run of several ranks: ranks.json over one run directory per rank, rank-N/
// (docs/trace-format.md, "Directories of several ranks"). Read for the views of all ranks and
// for comparing such a run with others as one of its ranks (its peak rank unless one is chosen).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

struct RankRow {
  int rank = 0, tp_rank = 0, dp_rank = 0, pp_rank = 0;  // rank = (pp_rank · dp + dp_rank) · tp + tp_rank
  std::string dir;  // relative to the ranks directory: rank-N
  bool complete = false;
  std::string status;  // as its summary.json says, or "missing"
  std::uint64_t peak_bytes = 0, predicted_peak_bytes = 0, comm_bytes_per_step = 0;
  double step_time_ms_median = 0;
};

struct RanksDir {
  int world_size = 1, dp = 1, tp = 1, zero = 0;
  int pp = 1, micro_batches = 1;  // pipeline stages (1 in directories older than them)
  bool sp = false;
  bool distribute_saved_activations = false;  // absent in older directories: false
  bool complete = false;
  std::string status, error;
  std::vector<RankRow> ranks;  // one per rank, in rank order
};

// Whether `dir` is such a directory (ranks.json and no summary.json).
bool is_ranks_dir(const std::string& dir);
// ranks.json of `dir`, checked: its format and version, the layout (world_size = tp · dp · pp), one
// row per rank in order with the fields of a rank. Throws Error naming the field and the value.
RanksDir read_ranks_json(const std::string& dir);
// The complete rank with the highest measured peak (the lowest such rank on a tie); -1 when
// no rank completed.
int peak_rank(const RanksDir& r);
// Rank `rank`'s run directory read as a run, its provenance given the layout (`tp`, `dp`,
// `sp`, `zero`, `rank` of ranks.json) so the run says where it stands alone. Throws Error for a
// rank the directory does not have or one that left no run directory.
Trace read_rank_run(const std::string& dir, const RanksDir& r, int rank);
// The rank a comparison takes: `chosen` when given (checked to be a rank of the run), else the
// peak rank (else rank 0).
int compared_rank(const RanksDir& r, std::optional<int> chosen, const std::string& dir);

}  // namespace remat
