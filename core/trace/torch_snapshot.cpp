// The snapshot schema of torch/cuda/memory.py (_snapshot): {"segments": [...], "device_traces":
// [[entry, ...] per device]}, in the torch 1.13 layout (blocks with "history") or the 2.x one
// (blocks with "address" and "requested_size", entries with "time_us"); torch 1.13's
// memory_snapshot() list of segments alone is read too.
#include "core/trace/torch_snapshot.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/trace/imported_trace.h"
#include "core/util/error.h"
#include "core/util/limits.h"
#include "core/util/printable.h"
#include "core/util/text_check.h"

namespace remat {

namespace {

using pickle::Document;
using pickle::Kind;
using pickle::Value;

// Frames named in an event's name: the innermost ones, where the allocation was asked for.
constexpr std::size_t kNameFrames = 3;
// Bytes of a frame's file or function name kept in an event's name (a pickle string may have
// 64 MiB; each event carrying it would copy it).
constexpr std::size_t kNamePartBytes = 200;

// `s` cut to at most `n` bytes at a UTF-8 character boundary, "..." where it was cut.
std::string cut(std::string_view s, std::size_t n) {
  if (s.size() <= n) return std::string(s);
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "...";
}

class SnapshotReader {
 public:
  SnapshotReader(const Document& d, const std::string& where) : d_(d), where_(where) {}

  [[noreturn]] void fail(const std::string& at, const std::string& why) const {
    throw Error(where_ + ": " + at + ": " + why);
  }
  const Value& field(const Value& dict, const char* key, const std::string& at) const {
    const Value* v = d_.get(dict, key);
    if (!v) fail(at, std::string("no '") + key + "'");
    return *v;
  }
  std::int64_t integer(const Value& v, const char* key, const std::string& at) const {
    if (v.kind != Kind::Int) fail(at, std::string("'") + key + "' is a " + pickle::to_string(v.kind) + ", not an int");
    return v.i;
  }
  std::int64_t int_field(const Value& dict, const char* key, const std::string& at) const {
    return integer(field(dict, key, at), key, at);
  }
  std::int64_t bytes_field(const Value& dict, const char* key, const std::string& at) const {
    std::int64_t v = int_field(dict, key, at);
    if (v < 0 || v > limits::kMemoryBytes)
      fail(at, std::string("'") + key + "' is " + std::to_string(v) + ", outside 0.." + std::to_string(limits::kMemoryBytes));
    return v;
  }
  std::string_view str_field(const Value& dict, const char* key, const std::string& at) const {
    const Value& v = field(dict, key, at);
    if (v.kind != Kind::String) fail(at, std::string("'") + key + "' is a " + pickle::to_string(v.kind) + ", not a str");
    return d_.str(v);
  }
  const std::vector<Value>& list_field(const Value& dict, const char* key, const std::string& at) const {
    const Value& v = field(dict, key, at);
    if (v.kind != Kind::List && v.kind != Kind::Tuple)
      fail(at, std::string("'") + key + "' is a " + pickle::to_string(v.kind) + ", not a list");
    return d_.items(v);
  }
  void need_dict(const Value& v, const std::string& at) const {
    if (v.kind != Kind::Dict) fail(at, std::string("a ") + pickle::to_string(v.kind) + ", not a dict");
  }

  // "file.py:12:name < file.py:40:caller ..." from a list of {filename, line, name}.
  const std::string& frames_name(const Value* frames, const std::string& at) {
    static const std::string none;
    if (!frames || frames->kind == Kind::None) return none;
    if (frames->kind != Kind::List && frames->kind != Kind::Tuple) fail(at, "'frames' is not a list");
    auto [it, fresh] = frame_names_.try_emplace(frames->index);
    if (!fresh) return it->second;
    std::string s;
    bool backward = false;
    const auto& fs = d_.items(*frames);
    for (std::size_t k = 0; k < fs.size(); ++k) {
      const std::string fat = at + " frame " + std::to_string(k);
      need_dict(fs[k], fat);
      std::string_view name = str_field(fs[k], "name", fat);
      std::string lower(name);
      for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      backward = backward || lower.find("backward") != std::string::npos ||
                 lower.find("autograd::engine") != std::string::npos;
      if (k >= kNameFrames) continue;
      std::string_view file = str_field(fs[k], "filename", fat);
      // They become the event's name in memory_events.csv and summary.json: text we can write.
      if (std::string p = text_problem(name); !p.empty()) fail(fat, "'name' " + p);
      if (std::string p = text_problem(file); !p.empty()) fail(fat, "'filename' " + p);
      auto slash = file.rfind('/');
      if (slash != std::string_view::npos) file.remove_prefix(slash + 1);
      if (!s.empty()) s += " < ";
      s.append(cut(file, kNamePartBytes)).append(":").append(std::to_string(int_field(fs[k], "line", fat)))
          .append(":").append(cut(name, kNamePartBytes));
    }
    if (backward) backward_frames_.insert(frames->index);
    it->second = std::move(s);
    return it->second;
  }
  bool is_backward(const Value* frames) const {
    return frames && (frames->kind == Kind::List || frames->kind == Kind::Tuple) && backward_frames_.count(frames->index);
  }

  const Document& d_;
  const std::string& where_;
  std::unordered_map<std::uint32_t, std::string> frame_names_;
  std::unordered_set<std::uint32_t> backward_frames_;
};

struct Live {
  std::uint64_t id;
  std::int64_t size;
  std::uint32_t name;
  Phase phase;
  bool free_requested = false;
};


}  // namespace

Trace trace_from_torch_snapshot(const Document& doc, const std::string& where) {
  SnapshotReader r(doc, where);
  const Value& root = doc.root();
  const std::vector<Value>* segments = nullptr;
  const std::vector<Value>* traces = nullptr;
  if (root.kind == Kind::List) {
    segments = &doc.items(root);  // torch 1.13 memory_snapshot(): the segments alone
  } else if (root.kind == Kind::Dict) {
    if (!doc.get(root, "segments"))
      r.fail("the top level", "a dict without 'segments': not a torch.cuda memory snapshot (_dump_snapshot)");
    segments = &r.list_field(root, "segments", "the top level");
    if (doc.get(root, "device_traces")) traces = &r.list_field(root, "device_traces", "the top level");
  } else {
    r.fail("the top level", std::string("a ") + pickle::to_string(root.kind) +
                                ": not a torch.cuda memory snapshot (a dict with 'segments' and 'device_traces')");
  }

  Trace t = imported_trace("pytorch-snapshot", where);
  NameTable names(t);
  // Segments: what is reserved at the end, and the blocks alive then (in case the trace, a ring
  // buffer, no longer holds their allocation).
  struct EndBlock { int device; std::int64_t addr, size; std::string name; Phase phase; };
  std::vector<EndBlock> end_blocks;
  std::unordered_map<int, std::int64_t> reserved_end;
  std::optional<SnapshotLayout> layout;
  // (device, address): where a block or an allocation is.
  auto key = [](int dev, std::int64_t addr) {
    return (static_cast<std::uint64_t>(dev) << 56) ^ static_cast<std::uint64_t>(addr);
  };
  // Each segment is its own range of addresses and each live block its own address: a segment or
  // block listed twice (a pickle can repeat one by reference for two bytes) is refused, so what
  // the file holds bounds the blocks it names.
  struct Range { int device; std::int64_t base, total; std::size_t segment; };
  std::vector<Range> ranges;
  std::unordered_map<std::uint64_t, std::string> block_at;
  for (std::size_t s = 0; s < segments->size(); ++s) {
    const std::string at = "segment " + std::to_string(s);
    const Value& seg = (*segments)[s];
    r.need_dict(seg, at);
    const std::int64_t base = r.int_field(seg, "address", at);
    const std::int64_t total = r.bytes_field(seg, "total_size", at);
    const int device = doc.get(seg, "device") ? static_cast<int>(r.int_field(seg, "device", at)) : 0;
    reserved_end[device] += total;
    ranges.push_back({device, base, total, s});
    std::int64_t offset = 0;
    const auto& blocks = r.list_field(seg, "blocks", at);
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const std::string bat = at + " block " + std::to_string(b);
      const Value& blk = blocks[b];
      r.need_dict(blk, bat);
      const std::int64_t size = r.bytes_field(blk, "size", bat);
      std::string_view state = r.str_field(blk, "state", bat);
      SnapshotLayout here = doc.get(blk, "history") ? SnapshotLayout::Torch113
                            : (doc.get(blk, "address") || doc.get(blk, "requested_size")) ? SnapshotLayout::Torch2
                            : layout.value_or(SnapshotLayout::Torch2);
      if (doc.get(blk, "history") && doc.get(blk, "address"))
        r.fail(bat, "both 'history' (torch 1.13) and 'address' (torch 2): a snapshot layout this reader does not know");
      if (layout && *layout != here) r.fail(bat, "the torch 1.13 and 2 snapshot layouts mixed in one file");
      layout = here;
      const std::int64_t addr = here == SnapshotLayout::Torch2 && doc.get(blk, "address")
                                    ? r.int_field(blk, "address", bat) : base + offset;
      offset += size;  // at most 2^57: each at most limits::kMemoryBytes
      if (offset > total)
        r.fail(bat, "the segment's blocks hold more than its total_size of " + std::to_string(total) +
                        " bytes (an inconsistent snapshot)");
      if (state == "inactive") continue;
      if (state != "active_allocated" && state != "active_pending_free")
        r.fail(bat, "block state '" + printable(std::string(state.substr(0, 80))) + "' is not one this reader knows (active_allocated, "
                    "active_pending_free, inactive): a newer snapshot layout?");
      if (state == "active_pending_free") continue;  // freed by the program already
      const Value* frames = doc.get(blk, "frames");
      if (here == SnapshotLayout::Torch113) {
        const auto& hist = r.list_field(blk, "history", bat);
        if (!hist.empty()) {
          r.need_dict(hist.back(), bat + " history");
          frames = doc.get(hist.back(), "frames");
        }
      }
      if (auto [it, fresh] = block_at.try_emplace(key(device, addr), bat); !fresh)
        r.fail(bat, "a live block at " + hex_address(addr) + ", where " + it->second +
                        " is already (a block listed twice: an inconsistent snapshot)");
      std::string nm = r.frames_name(frames, bat);
      end_blocks.push_back({device, addr, size, nm.empty() ? hex_address(addr) : nm,
                            r.is_backward(frames) ? Phase::Backward : Phase::Forward});
    }
  }

  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.device != b.device ? a.device < b.device : a.base != b.base ? a.base < b.base : a.segment < b.segment;
  });
  for (std::size_t k = 1; k < ranges.size(); ++k) {
    const Range &a = ranges[k - 1], &b = ranges[k];
    if (a.device == b.device && (b.base == a.base || static_cast<std::uint64_t>(b.base) - static_cast<std::uint64_t>(a.base) <
                                                  static_cast<std::uint64_t>(a.total)))
      r.fail("segment " + std::to_string(std::max(a.segment, b.segment)),
             "its addresses overlap segment " + std::to_string(std::min(a.segment, b.segment)) + "'s (" +
                 hex_address(b.base) + " within " + hex_address(a.base) + " + " + std::to_string(a.total) +
                 " bytes): a segment listed twice or an inconsistent snapshot");
  }

  // The trace entries, every device in time order.
  struct Entry { std::int64_t t; int device; std::size_t index; const Value* v; };
  std::vector<Entry> entries;
  bool timed = true;
  std::int64_t t0 = std::numeric_limits<std::int64_t>::max();
  if (traces) {
    for (std::size_t dev = 0; dev < traces->size(); ++dev) {
      const Value& list = (*traces)[dev];
      if (list.kind != Kind::List) r.fail("device_traces " + std::to_string(dev), "not a list of trace entries");
      const auto& es = doc.items(list);
      for (std::size_t i = 0; i < es.size(); ++i) {
        const std::string at = "trace entry " + std::to_string(i) + " of device " + std::to_string(dev);
        r.need_dict(es[i], at);
        std::int64_t tu = 0;
        if (const Value* tv = doc.get(es[i], "time_us")) {
          tu = r.integer(*tv, "time_us", at);
          t0 = std::min(t0, tu);
        } else {
          timed = false;
        }
        entries.push_back({tu, static_cast<int>(dev), i, &es[i]});
      }
    }
  }
  if (!timed) {  // torch 1.13 entries have no time: one microsecond per entry, in order
    for (std::size_t k = 0; k < entries.size(); ++k) entries[k].t = static_cast<std::int64_t>(k);
    t0 = 0;
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.t < b.t; });
  const bool many_devices = traces && traces->size() > 1;
  auto device_name = [&](int dev, const std::string& nm) {
    return many_devices ? "cuda:" + std::to_string(dev) + " " + nm : nm;
  };

  // First pass: what the trace frees or ends with that it never allocated was alive before it
  // began; reserved bytes run back from the segments at the end.
  std::unordered_map<int, std::int64_t> reserved_delta;
  std::uint64_t next_id = 0;
  std::vector<MemoryEvent> events;
  std::unordered_map<std::uint64_t, Live> live;  // (device, addr) -> the allocation there
  std::vector<MemoryEvent> baseline;
  std::unordered_map<int, std::int64_t> reserved;
  for (const auto& e : entries) {
    const std::string at = "trace entry " + std::to_string(e.index) + " of device " + std::to_string(e.device);
    std::string_view action = r.str_field(*e.v, "action", at);
    if (action == "segment_alloc" || action == "segment_map") reserved_delta[e.device] += r.bytes_field(*e.v, "size", at);
    else if (action == "segment_free" || action == "segment_unmap") reserved_delta[e.device] -= r.bytes_field(*e.v, "size", at);
  }
  std::int64_t reserved_total = 0;
  for (auto& [dev, end] : reserved_end) {
    reserved[dev] = std::max<std::int64_t>(0, end - reserved_delta[dev]);
    reserved_total += reserved[dev];
  }
  for (auto& [dev, d] : reserved_delta)
    if (!reserved.count(dev)) reserved[dev] = std::max<std::int64_t>(0, -d), reserved_total += reserved[dev];

  auto event = [&](std::int64_t t_ns, std::int32_t step, const Live& l, std::int64_t delta) {
    MemoryEvent m;
    m.t_ns = t_ns;
    m.step = step;
    m.id = l.id;
    m.delta = delta;
    m.category = Category::Unknown;
    m.phase = l.phase;
    m.space = Space::Device;
    m.block = -1;
    m.tensor = l.name;
    m.reserved = static_cast<std::uint64_t>(std::clamp<std::int64_t>(reserved_total, 0, limits::kMemoryBytes));
    return m;
  };
  auto clock = [&](std::int64_t t_us) -> std::int64_t {
    std::int64_t d = t_us - t0;
    if (d < 0 || d > limits::kClockNs / 1000) throw Error(where + ": trace times span more than the run clock holds");
    return d * 1000;
  };

  for (const auto& e : entries) {
    const std::string at = "trace entry " + std::to_string(e.index) + " of device " + std::to_string(e.device);
    const Value& v = *e.v;
    std::string_view action = r.str_field(v, "action", at);
    const std::int64_t t_ns = clock(e.t);
    if (action == "snapshot" || action == "oom") {
      if (action == "oom") t.provenance.emplace_back("oom_at_ns", std::to_string(t_ns));
      continue;
    }
    const std::int64_t size = r.bytes_field(v, "size", at);
    if (action == "segment_alloc" || action == "segment_map") {
      reserved_total += size;
      continue;
    }
    if (action == "segment_free" || action == "segment_unmap") {
      reserved_total -= size;
      continue;
    }
    const std::int64_t addr = r.int_field(v, "addr", at);
    const std::uint64_t k = key(e.device, addr);
    if (action == "alloc") {
      if (size == 0) continue;
      if (live.count(k))
        r.fail(at, "alloc at " + hex_address(addr) + ", which is allocated already (an inconsistent trace)");
      const Value* frames = doc.get(v, "frames");
      std::string nm = r.frames_name(frames, at);
      Live l{next_id++, size, names.id(device_name(e.device, nm.empty() ? hex_address(addr) : nm)),
             r.is_backward(frames) ? Phase::Backward : Phase::Forward};
      live.emplace(k, l);
      events.push_back(event(t_ns, 0, l, size));
      continue;
    }
    if (action == "free_requested" || action == "free_completed" || action == "free") {
      if (size == 0) continue;
      auto it = live.find(k);
      if (it == live.end()) {
        if (action == "free_completed") continue;  // its free was requested before the trace began
        // Allocated before the trace began: alive from the start.
        Live l{next_id++, size, names.id(device_name(e.device, "(before the trace) " + hex_address(addr))), Phase::Forward};
        baseline.push_back(event(0, -1, l, size));
        events.push_back(event(t_ns, 0, l, -size));
        continue;
      }
      if (it->second.free_requested) {  // the completion of a requested free
        live.erase(it);
        continue;
      }
      if (it->second.size != size)
        r.fail(at, "frees " + std::to_string(size) + " bytes at " + hex_address(addr) + ", allocated with " +
                       std::to_string(it->second.size));
      events.push_back(event(t_ns, 0, it->second, -size));
      if (action == "free_requested") it->second.free_requested = true;
      else live.erase(it);
      continue;
    }
    r.fail(at, "action '" + printable(std::string(action.substr(0, 80))) + "' is not one this reader knows (alloc, free_requested, "
               "free_completed, segment_alloc, segment_free, segment_map, segment_unmap, snapshot, oom): a newer "
               "snapshot layout?");
  }
  // Blocks alive at the end that the trace never allocated were there from the start.
  for (const auto& b : end_blocks) {
    if (b.size == 0) continue;  // a block of 0 bytes holds nothing (as its alloc and free are skipped)
    auto it = live.find(key(b.device, b.addr));
    if (it != live.end()) continue;
    Live l{next_id++, b.size, names.id(device_name(b.device, b.name)), b.phase};
    baseline.push_back(event(0, -1, l, b.size));
  }
  // The baseline's reserved bytes: what the segments held before the trace's first entry.
  std::int64_t reserved_start = 0;
  for (const auto& [dev, r0] : reserved) reserved_start += r0;
  for (auto& b : baseline) b.reserved = static_cast<std::uint64_t>(reserved_start);
  t.events = std::move(baseline);
  t.events.insert(t.events.end(), events.begin(), events.end());
  t.provenance.emplace_back("snapshot_layout", !layout ? "unknown (no blocks)"
                                               : *layout == SnapshotLayout::Torch113 ? "torch 1.13" : "torch 2");
  finish_imported(t, entries.empty() ? 0 : clock(entries.back().t));
  return t;
}

Trace import_torch_snapshot(const std::string& path) {
  return trace_from_torch_snapshot(pickle::read_file(path), path);
}

}  // namespace remat
