#include "fuzz/round_trip.h"

#include <cstdlib>
#include <iostream>

#include "core/trace/run_dir.h"
#include "fuzz/fuzz_util.h"

namespace remat::fuzz {

void write_and_read_back(const Trace& t, const char* target) {
  static const std::string dir = scratch_path("imported");
  try {
    write_run_dir(t, dir, true);
    read_run_dir(dir);
  } catch (const std::exception& e) {
    std::cerr << "fuzz " << target << ": an accepted input gave a run directory that cannot be written or read back: "
              << e.what() << "\n";
    std::abort();
  }
}

}  // namespace remat::fuzz
