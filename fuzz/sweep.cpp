// sweep.json as `compare DIR` reads it from a sweep directory.
#include "core/trace/schema.h"
#include "core/trace/sweep_json.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"

namespace remat::fuzz {

void sweep(const std::uint8_t* data, std::size_t size) {
  static const std::string path = scratch_path(schema::kSweepFile);
  write_file(path, data, size);
  refused_or_accepted([] { read_sweep_json(path); });
}

}  // namespace remat::fuzz
