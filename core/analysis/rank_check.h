// Whether the runs read from a directory of several ranks (ranks.json over rank-N/) are that
// run's ranks: every rank there, each rank-N/ a run of rank N of this layout, and all of one job
// (the same model, policy, seed and steps; and the figures ranks.json copied from the rank's
// own summary at the job's end — its peak and its median step time, which another job's run
// of the same command would not reproduce to the nanosecond). The views and the CLI show or
// export only the ranks that pass, and say why the others were left out.
#pragma once
#include <string>
#include <vector>

#include "core/trace/chrome_trace.h"
#include "core/trace/ranks_dir.h"
#include "core/trace/trace.h"

namespace remat {

struct RankIssue {
  int rank = 0;
  bool missing = false;  // no run directory (else: a run that is not this rank of this job)
  std::string what;      // "rank 1 of 2 is missing: ...", "rank-1 is from another job: ..."
};

// `ranks[i]` is what rank-i/ read as (null: no run directory, or it could not be read).
std::vector<RankIssue> check_ranks(const RanksDir& r, const std::vector<const Trace*>& ranks);
// The issues as lines, "" for none.
std::string describe(const std::vector<RankIssue>& issues);
// How a rank is named where all ranks show: "rank 1 (tp rank 1, dp rank 0)", with its stage
// first in a pipeline ("rank 2 (stage 1, tp rank 0, dp rank 0)").
std::string rank_title(const RanksDir& r, int rank);

// The ranks as the Chrome trace of the whole run writes them (write_ranks_chrome_trace), each
// named by rank_title, after check_ranks: a rank of another job is refused (Error with its
// issue's text), a missing rank is left out (no process). Returns the missing ranks' issues,
// for the caller to say.
std::vector<RankIssue> chrome_ranks(const RanksDir& r, const std::vector<const Trace*>& ranks,
                                    std::vector<ChromeRank>& out);

}  // namespace remat
