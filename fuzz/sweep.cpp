// sweep.json as `compare DIR` reads it from a sweep directory.
#include "core/trace/sweep_file.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"

namespace remat::fuzz {

void sweep(const std::uint8_t* data, std::size_t size) {
  static const std::string path = scratch_path(kSweepFile);
  write_file(path, data, size);
  refused_or_accepted([] { read_sweep_file(path); });
}

}  // namespace remat::fuzz
