// A torch memory snapshot as `import FILE.pickle` reads it: the restricted pickle reader, then
// the snapshot schema, then the run directory's figures of what it accepts.
#include <string_view>

#include "core/io/pickle_reader.h"
#include "core/trace/torch_snapshot.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"

namespace remat::fuzz {

void torch_snapshot(const std::uint8_t* data, std::size_t size) {
  refused_or_accepted([&] {
    const std::string where = "snapshot.pickle";
    auto doc = pickle::parse(std::string_view(reinterpret_cast<const char*>(data), size), where);
    trace_from_torch_snapshot(doc, where);
  });
}

}  // namespace remat::fuzz
