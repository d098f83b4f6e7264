// A torch.profiler trace as `import FILE.json` reads it (its events streamed as the parser has
// them), then the run directory of what it accepts, written and read back.
#include "core/trace/profiler_trace.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/round_trip.h"
#include "fuzz/targets.h"

namespace remat::fuzz {

void profiler_trace(const std::uint8_t* data, std::size_t size) {
  static const std::string path = scratch_path("profile.json");
  write_file(path, data, size);
  Trace t;
  try {
    t = import_profiler_trace(path);
  } catch (const Error&) {
    return;
  }
  write_and_read_back(t, "profiler_trace");
}

}  // namespace remat::fuzz
