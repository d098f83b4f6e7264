#include "core/trace/imported_trace.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "core/util/limits.h"

namespace remat {

Trace imported_trace(const std::string& source, const std::string& path) {
  Trace t;
  t.source = source;
  // What the run list and compare show: the file and where it came from.
  const std::string stem = std::filesystem::path(path).stem().string();
  t.model.name = stem.empty() ? "imported" : stem;
  t.policy = source;
  t.device = "cuda";
  t.warmup = 0;
  t.steps = 1;
  t.schedule.policy = t.policy;
  t.schedule.blocks = t.model.layers;
  t.provenance.emplace_back("imported_from", std::filesystem::path(path).filename().string());
  return t;
}

std::string hex_address(std::int64_t a) {
  static const char* d = "0123456789abcdef";
  std::string s;
  auto u = static_cast<std::uint64_t>(a);
  do {
    s.insert(s.begin(), d[u & 15]);
    u >>= 4;
  } while (u);
  return "0x" + s;
}

std::uint32_t NameTable::id(std::string_view name) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  auto id = static_cast<std::uint32_t>(t_.names.size());
  t_.names.emplace_back(name);
  ids_.emplace(std::string(name), id);
  return id;
}

void finish_imported(Trace& t, std::int64_t end_ns) {
  std::size_t first = 0;
  while (first < t.events.size() && t.events[first].step < 0) ++first;
  for (const auto& e : t.events) end_ns = std::max(end_ns, e.t_ns);
  for (const auto& o : t.ops) end_ns = std::max(end_ns, o.end_ns);
  // The peak of live device bytes over the step, counting the baseline from its start.
  std::int64_t live = 0;
  for (std::size_t i = 0; i < first; ++i)
    if (t.events[i].space == Space::Device) live += t.events[i].delta;
  std::int64_t peak = live;
  std::size_t peak_at = first;  // events [0, peak_at) make the peak
  std::uint64_t reserved_at_peak = first ? t.events[first - 1].reserved : 0;
  for (std::size_t i = first; i < t.events.size(); ++i) {
    const auto& e = t.events[i];
    if (e.space == Space::Device) live += e.delta;
    if (live > limits::kMemoryBytes)
      throw LimitError("the imported trace holds more than " + std::to_string(limits::kMemoryBytes) +
                       " live bytes at event " + std::to_string(i));
    if (live > peak) {
      peak = live;
      peak_at = i + 1;
      reserved_at_peak = e.reserved;
    }
  }
  StepStats s;
  s.step = 0;
  s.counted = true;
  s.loss = std::numeric_limits<double>::quiet_NaN();
  s.time_ms = static_cast<double>(end_ns) / 1e6;
  s.peak_bytes = static_cast<std::uint64_t>(peak);
  s.reserved_bytes = reserved_at_peak;
  s.start_ns = 0;
  s.end_ns = end_ns;
  t.step_stats = {s};
  t.peak_bytes = s.peak_bytes;
  t.peak_reserved_bytes = reserved_at_peak;
  t.step_first_event = first;
  t.step_end_event = t.events.size();
  t.step_start_ns = 0;
  t.step_end_ns = end_ns;
  t.flops = {};
  for (const auto& o : t.ops)
    if (__builtin_add_overflow(t.flops.other, o.flops, &t.flops.other))
      throw LimitError("the imported ops' flops add up to more than 2^64");
  // The largest tensors alive at the peak.
  std::unordered_map<std::uint64_t, const MemoryEvent*> alive;
  for (std::size_t i = 0; i < peak_at; ++i) {
    const auto& e = t.events[i];
    if (e.delta > 0) alive[e.id] = &e;
    else alive.erase(e.id);
  }
  std::vector<const MemoryEvent*> v;
  for (const auto& [id, e] : alive)
    if (e->space == Space::Device) v.push_back(e);
  std::sort(v.begin(), v.end(), [](const MemoryEvent* a, const MemoryEvent* b) {
    return a->delta != b->delta ? a->delta > b->delta : a->id < b->id;
  });
  t.peak_tensors.clear();
  for (std::size_t i = 0; i < v.size() && i < 10; ++i)
    t.peak_tensors.emplace_back(t.names[v[i]->tensor], static_cast<std::uint64_t>(v[i]->delta));
}

}  // namespace remat
