// A torch.profiler trace as `import FILE.json` reads it (its events read from the parse events
// as the parser has them), then the run directory of what it accepts, written and read back.
// What the streamed import accepts, the whole parsed document gives too, op for op and event for
// event: the two ways of reading an event must agree.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/trace/profiler_trace.h"
#include "core/util/json_io.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/round_trip.h"
#include "fuzz/targets.h"

namespace remat::fuzz {

namespace {

[[noreturn]] void differ(const std::string& what) {
  std::fprintf(stderr, "profiler_trace: the streamed import and the parsed document differ: %s\n", what.c_str());
  std::abort();
}

void same_as_parsed(const Trace& t, const std::string& text, const std::string& path) {
  Trace d;
  try {
    d = trace_from_profiler_json(parse_json(text, path), path);
  } catch (const Error& e) {
    differ(std::string("the parsed document is refused: ") + e.what());
  }
  if (d.ops.size() != t.ops.size() || d.events.size() != t.events.size()) differ("sizes");
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const OpRecord &a = t.ops[i], &b = d.ops[i];
    if (a.name != b.name || a.op != b.op || a.start_ns != b.start_ns || a.end_ns != b.end_ns || a.phase != b.phase ||
        a.stream != b.stream || a.flops != b.flops || a.op_id != b.op_id)
      differ("op " + std::to_string(i));
  }
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const MemoryEvent &a = t.events[i], &b = d.events[i];
    if (a.t_ns != b.t_ns || a.delta != b.delta || a.id != b.id || a.phase != b.phase || a.reserved != b.reserved ||
        t.names[a.tensor] != d.names[b.tensor])
      differ("memory event " + std::to_string(i));
  }
}

}  // namespace

void profiler_trace(const std::uint8_t* data, std::size_t size) {
  static const std::string path = scratch_path("profile.json");
  write_file(path, data, size);
  Trace t;
  try {
    t = import_profiler_trace(path);
  } catch (const Error&) {
    return;
  }
  same_as_parsed(t, std::string(reinterpret_cast<const char*>(data), size), path);
  write_and_read_back(t, "profiler_trace");
}

}  // namespace remat::fuzz
