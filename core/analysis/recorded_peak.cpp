#include "core/analysis/recorded_peak.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace remat {

bool module_inside(const std::string& module, const std::string& prefix) {
  return module == prefix || (module.size() > prefix.size() && module.compare(0, prefix.size(), prefix) == 0 &&
                              module[prefix.size()] == '.');
}

namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

std::int64_t release_time(std::int64_t released_ns) { return released_ns < 0 ? kNever : released_ns; }

struct Interval {
  std::int64_t from, to;  // to: kNever when never released
};

// A storage's lives: its holders' intervals, those that overlap merged.
struct Storage {
  std::uint64_t bytes = 0;
  std::vector<Interval> holds;
  std::vector<Interval> lives() const {
    std::vector<Interval> v = holds, out;
    std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.from < b.from; });
    for (const Interval& i : v)
      if (!out.empty() && i.from <= out.back().to) out.back().to = std::max(out.back().to, i.to);
      else out.push_back(i);
    return out;
  }
};

struct Change {
  std::int64_t t;
  int order;  // at one time: recorded events, then frees, then allocations
  std::int64_t delta;
};

std::uint64_t peak_of(std::vector<Change> changes) {
  std::stable_sort(changes.begin(), changes.end(),
                   [](const Change& a, const Change& b) { return a.t != b.t ? a.t < b.t : a.order < b.order; });
  __int128 live = 0, peak = 0;  // sums of up to 2^32 rows of up to 2^56 bytes
  for (const auto& c : changes) {
    live += c.delta;
    peak = std::max(peak, live);
  }
  return peak > static_cast<__int128>(std::numeric_limits<std::uint64_t>::max()) ? std::numeric_limits<std::uint64_t>::max()
                                                                                 : static_cast<std::uint64_t>(peak);
}

}  // namespace

RecordedPeak replay_peak(const RecordedRun& run, const std::vector<PlanRegion>& regions, bool keep_inputs) {
  auto region_of = [&regions](const RecordedTensor& t) {
    for (std::size_t r = 0; r < regions.size(); ++r) {
      if (t.packed_ns < regions[r].from || t.packed_ns > regions[r].to) continue;
      for (const auto& p : regions[r].prefixes)
        if (module_inside(t.module, p)) return static_cast<int>(r);
    }
    return -1;
  };
  std::unordered_set<std::uint64_t> parameter;
  for (const auto& t : run.tensors)
    if (t.parameter) parameter.insert(t.storage);
  // Per region: when the backward first uses it, when its backward ends, the storages it saved
  // and the ones it keeps as its inputs.
  struct Span {
    std::int64_t first_use = kNever, end = -1;
    std::unordered_map<std::uint64_t, std::uint64_t> saved;  // storage -> bytes
    std::unordered_set<std::uint64_t> inputs;
  };
  std::vector<Span> spans(regions.size());
  std::unordered_map<std::uint64_t, Storage> storages;
  for (const auto& t : run.tensors) {
    if (parameter.count(t.storage) || t.storage_bytes == 0) continue;
    const int r = region_of(t);
    if (r < 0) {
      Storage& s = storages[t.storage];
      s.bytes = t.storage_bytes;
      s.holds.push_back({t.packed_ns, release_time(t.released_ns)});
      continue;
    }
    Span& s = spans[static_cast<std::size_t>(r)];
    s.end = std::max(s.end, release_time(t.released_ns));
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
          Storage& s = storages[storage];
          s.bytes = bytes;
          s.holds.push_back({c->start_ns, spans[r].end < 0 ? kNever : spans[r].end});
          spans[r].inputs.insert(storage);
        }
  std::vector<Change> changes;
  for (const auto& e : run.events)
    if (!e.activation) changes.push_back({e.t_ns, 0, e.delta});
  std::unordered_map<std::uint64_t, std::vector<Interval>> lives;
  for (const auto& [id, s] : storages) {
    auto& v = lives[id] = s.lives();
    for (const Interval& i : v) {
      changes.push_back({i.from, 2, static_cast<std::int64_t>(s.bytes)});
      if (i.to != kNever) changes.push_back({i.to, 1, -static_cast<std::int64_t>(s.bytes)});
    }
  }
  RecordedPeak out;
  out.held = peak_of(changes);
  for (const auto& s : spans) {
    if (s.first_use == kNever) continue;
    for (const auto& [storage, bytes] : s.saved) {
      if (s.inputs.count(storage)) continue;  // held as the checkpoint's input all along
      bool alive = false;
      if (auto it = lives.find(storage); it != lives.end())
        for (const Interval& i : it->second) alive = alive || (i.from <= s.first_use && s.first_use < i.to);
      if (alive) continue;
      changes.push_back({s.first_use, 2, static_cast<std::int64_t>(bytes)});
      if (s.end != kNever) changes.push_back({s.end, 1, -static_cast<std::int64_t>(bytes)});
    }
  }
  out.with_recompute = peak_of(std::move(changes));
  return out;
}

}  // namespace remat
