#include "core/analysis/recorded_peak.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace remat {

bool module_inside(const std::string& module, const std::string& prefix) {
  return module == prefix || (module.size() > prefix.size() && module.compare(0, prefix.size(), prefix) == 0 &&
                              module[prefix.size()] == '.');
}

namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

std::int64_t release_time(const RecordedTensor& t) { return t.released_ns < 0 ? kNever : t.released_ns; }

// A storage's life under the plan: from its first holder's save to its last holder's release.
struct Life {
  std::uint64_t bytes = 0;
  std::int64_t from = kNever, to = -1;
  void hold(std::int64_t a, std::int64_t b) {
    from = std::min(from, a);
    to = std::max(to, b);
  }
  bool held() const { return to >= 0; }
};

struct Change {
  std::int64_t t;
  std::size_t order;  // recorded events first at one time, then frees before allocations
  std::int64_t delta;
};

std::uint64_t peak_of(std::vector<Change> changes) {
  std::stable_sort(changes.begin(), changes.end(),
                   [](const Change& a, const Change& b) { return a.t != b.t ? a.t < b.t : a.order < b.order; });
  std::int64_t live = 0, peak = 0;
  for (const auto& c : changes) {
    live += c.delta;
    peak = std::max(peak, live);
  }
  return static_cast<std::uint64_t>(peak);
}

}  // namespace

RecordedPeak replay_peak(const RecordedRun& run, const std::vector<PlanRegion>& regions, bool keep_inputs) {
  auto region_of = [&regions](const std::string& module) {
    for (std::size_t r = 0; r < regions.size(); ++r)
      for (const auto& p : regions[r].prefixes)
        if (module_inside(module, p)) return static_cast<int>(r);
    return -1;
  };
  std::unordered_map<std::uint64_t, bool> parameter;
  for (const auto& t : run.tensors)
    if (t.parameter) parameter[t.storage] = true;
  // Per region: when the backward first uses it, when its backward ends, the storages it saved.
  struct Span {
    std::int64_t first_use = kNever, end = -1;
    std::unordered_map<std::uint64_t, std::uint64_t> saved;  // storage -> bytes
  };
  std::vector<Span> spans(regions.size());
  std::unordered_map<std::uint64_t, Life> lives;
  for (const auto& t : run.tensors) {
    if (t.parameter || parameter.count(t.storage) || t.storage_bytes == 0) continue;
    const int r = region_of(t.module);
    if (r < 0) {
      Life& l = lives[t.storage];
      l.bytes = t.storage_bytes;
      l.hold(t.packed_ns, release_time(t));
      continue;
    }
    Span& s = spans[static_cast<std::size_t>(r)];
    if (t.released_ns >= 0) s.end = std::max(s.end, t.released_ns);
    if (t.held_at_backward) {
      s.saved[t.storage] = t.storage_bytes;
      if (t.unpacked_ns >= 0) s.first_use = std::min(s.first_use, t.unpacked_ns);
    }
  }
  if (keep_inputs)
    for (std::size_t r = 0; r < regions.size(); ++r)
      for (const RecordedCall* c : regions[r].heads)
        for (auto [storage, bytes] : c->inputs) {
          if (parameter.count(storage) || bytes == 0) continue;
          Life& l = lives[storage];
          l.bytes = bytes;
          l.hold(c->start_ns, spans[r].end < 0 ? kNever : spans[r].end);
        }
  std::vector<Change> changes;
  for (std::size_t i = 0; i < run.events.size(); ++i)
    if (!run.events[i].activation) changes.push_back({run.events[i].t_ns, 0, run.events[i].delta});
  for (const auto& [storage, l] : lives) {
    if (!l.held()) continue;
    changes.push_back({l.from, 2, static_cast<std::int64_t>(l.bytes)});
    if (l.to != kNever) changes.push_back({l.to, 1, -static_cast<std::int64_t>(l.bytes)});
  }
  RecordedPeak out;
  out.held = peak_of(changes);
  for (const auto& s : spans) {
    if (s.first_use == kNever) continue;
    std::int64_t bytes = 0;
    for (const auto& [storage, b] : s.saved)
      if (!lives.count(storage)) bytes += static_cast<std::int64_t>(b);
    changes.push_back({s.first_use, 2, bytes});
    if (s.end >= 0) changes.push_back({s.end, 1, -bytes});
  }
  out.with_recompute = peak_of(std::move(changes));
  return out;
}

}  // namespace remat
