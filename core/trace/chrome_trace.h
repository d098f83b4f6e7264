// The Chrome trace of a run of several ranks: one process per rank (its name, e.g. "rank 1 (tp
// rank 1)"), every rank on its own clock from the start of its last counted step, and flows from
// each collective to its partners on the other ranks (core/analysis/collective_links.h). The
// single run's trace.json is write_chrome_trace (run_dir.h).
#pragma once
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

struct ChromeRank {
  const Trace* trace = nullptr;  // null: a rank left out (it has no process)
  std::string name;              // the process's name
};

// Throws Error when no rank has a trace or the file cannot be written.
void write_ranks_chrome_trace(const std::vector<ChromeRank>& ranks, const std::string& path);

}  // namespace remat
