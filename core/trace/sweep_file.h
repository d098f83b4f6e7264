// sweep.json: what `sweep --out` writes next to its run directories (docs/trace-format.md).
#pragma once
#include <string>
#include <vector>

namespace remat {

inline constexpr const char* kSweepFile = "sweep.json";

// One run of a sweep: its label and its run directory, relative to the sweep directory.
struct SweepRun {
  std::string run, dir;
};

// The runs of a sweep file, in the order they ran. Throws Error naming the file when it is
// missing, not valid JSON, not a RematLab sweep file, or has a run without 'run' and 'dir'.
std::vector<SweepRun> read_sweep_file(const std::string& path);

}  // namespace remat
