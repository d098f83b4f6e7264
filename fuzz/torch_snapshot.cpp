// A torch memory snapshot as `import FILE.pickle` reads it: the restricted pickle reader, then
// the snapshot schema, then the run directory of what it accepts, written and read back.
#include <string_view>

#include "core/io/pickle_reader.h"
#include "core/trace/torch_snapshot.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/round_trip.h"
#include "fuzz/targets.h"

namespace remat::fuzz {

void torch_snapshot(const std::uint8_t* data, std::size_t size) {
  const std::string where = "snapshot.pickle";
  Trace t;
  try {
    auto doc = pickle::parse(std::string_view(reinterpret_cast<const char*>(data), size), where);
    t = trace_from_torch_snapshot(doc, where);
  } catch (const Error&) {
    return;
  }
  write_and_read_back(t, "torch_snapshot");
}

}  // namespace remat::fuzz
