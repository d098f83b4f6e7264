// What the importers of other tools' traces share (torch_snapshot.h, profiler_trace.h): an
// imported trace is one counted step with no model and no schedule, its memory events and ops
// on a clock that starts at its first record (docs/trace-format.md, "Imported traces").
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/trace/trace.h"

namespace remat {

// An empty imported trace: source, device, provenance naming the file; model, policy and
// schedule placeholders (no blocks are run): the model named after the file, the policy after
// the source.
Trace imported_trace(const std::string& source, const std::string& path);

// "0x7f00a000": an address as the importers name memory they know nothing else of.
std::string hex_address(std::int64_t a);

// Interns tensor names into Trace::names.
class NameTable {
 public:
  explicit NameTable(Trace& t) : t_(t) {}
  std::uint32_t id(std::string_view name);

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  Trace& t_;
  std::unordered_map<std::string, std::uint32_t, Hash, std::equal_to<>> ids_;
};

// After the events (baseline ones with step -1 first, then step 0) and ops are in: the one
// step's figures (time, peak, reserved at the peak), the timeline range and the largest tensors
// alive at the peak. `end_ns` is the end of the step (at least the last event and op).
void finish_imported(Trace& t, std::int64_t end_ns);

}  // namespace remat
