// The torch.profiler Chrome trace in both layouts torch writes: Kineto's object
// {"schemaVersion", "traceEvents": [...]} ("X" events by category, "[memory]" instants with args
// Addr, Bytes, Total Reserved and Device Type), and the legacy autograd profiler's bare array
// (torch without Kineto, e.g. Debian's 1.13 on the CPU): "X" events of CPU functions without a
// category, times in whole microseconds, no memory.
#include "core/trace/profiler_trace.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/trace/imported_trace.h"
#include "core/trace/profiler_event.h"
#include "core/trace/run_dir.h"
#include "core/util/error.h"
#include "core/util/json_io.h"
#include "core/util/limits.h"

namespace remat {

namespace {

enum class Role { CpuOp, Runtime, Device };

constexpr std::uint32_t kNoText = std::numeric_limits<std::uint32_t>::max();

// What is kept of an event: numbers, and its texts as indices into the trace's interned texts
// (a profile names a few thousand ops over millions of events), so the vector of them moves and
// grows as plain bytes.
struct Rec {
  double ts = 0, dur = 0;  // microseconds
  std::int64_t tid_key = 0;
  // The args read: "External id", "correlation", "flops"; for [memory] instants "Device Type",
  // "Device Id", "Addr", "Bytes", "Total Reserved" (the has_ flags: present and integers).
  std::int64_t external = 0, correlation = 0;
  std::int64_t flops = 0, device_type = 1, device_id = 0, addr = 0, bytes = 0, total_reserved = 0;
  std::uint32_t name = kNoText, cat = kNoText;
  std::uint32_t enclosing = kNoText;  // memory: the innermost op around it
  bool has_external = false, has_correlation = false;
  bool memory = false;
  Role role = Role::CpuOp;
  Stream stream = Stream::Host;
  Phase phase = Phase::Forward;
};
static_assert(std::is_trivially_copyable_v<Rec>);

// The texts of a trace's events, each kept once.
class Texts {
 public:
  std::uint32_t id(const std::string& s) {
    auto [it, fresh] = ids_.try_emplace(s, static_cast<std::uint32_t>(texts_.size()));
    if (fresh) texts_.push_back(&it->first);
    return it->second;
  }
  // The empty text for kNoText.
  const std::string& operator[](std::uint32_t i) const { return i == kNoText ? empty_ : *texts_[i]; }
  std::size_t size() const { return texts_.size(); }

 private:
  std::unordered_map<std::string, std::uint32_t> ids_;  // nodes: their keys never move
  std::vector<const std::string*> texts_;
  std::string empty_;
};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The stream and role of an "X" event's category; false for categories that are not imported
// (python_function, user_annotation, gpu_user_annotation, ...).
bool classify(const std::string& cat, const std::string& name, Rec& r) {
  const std::string c = lower(cat);
  if (c == "cpu_op" || c == "operator") {
    r.role = Role::CpuOp;
    r.stream = Stream::Host;
  } else if (c == "cuda_runtime" || c == "cuda_driver" || c == "runtime" || c == "driver") {
    r.role = Role::Runtime;
    r.stream = Stream::Host;
  } else if (c == "kernel" || c == "gpu_memset" || c == "memset") {
    r.role = Role::Device;
    r.stream = Stream::Compute;
  } else if (c == "gpu_memcpy" || c == "memcpy") {
    r.role = Role::Device;
    const bool d2h = name.find("DtoH") != std::string::npos || name.find("Device -> Pageable") != std::string::npos ||
                     name.find("Device -> Pinned") != std::string::npos;
    const bool h2d = name.find("HtoD") != std::string::npos || name.find("-> Device") != std::string::npos;
    r.stream = d2h ? Stream::CopyToHost : h2d ? Stream::CopyToDevice : Stream::Compute;
  } else {
    return false;
  }
  return true;
}

// What an op's own name says of its phase, if anything.
std::optional<Phase> marker_phase(const std::string& name) {
  if (name.rfind("autograd::engine::evaluate_function", 0) == 0 || name.find("Backward") != std::string::npos ||
      name.find("backward") != std::string::npos)
    return Phase::Backward;
  if (name.rfind("Optimizer.", 0) == 0) return Phase::Optimizer;
  return std::nullopt;
}

// The events one at a time (each as soon as the parser has it), then the trace.
class Events {
 public:
  Events(const std::string& where, bool legacy) : where_(where), legacy_(legacy) {}

  // Room for the events of a file of `bytes`, so that the records are not moved as they grow
  // (an event of a torch trace takes 150 to 400 bytes of JSON; fewer bytes only mean a move).
  void expect_bytes(std::uint64_t bytes) { expected_ = static_cast<std::size_t>(bytes / kBytesPerEvent); }

  Error refuse(const std::string& why) const { return Error(where_ + ": not a torch.profiler trace (" + why + ")"); }

  void add(std::size_t i, const ProfilerEvent& e) {
    if (!e.not_object.empty()) throw refuse("event " + std::to_string(i) + " is " + e.not_object + ", not an object");
    if (e.ts) {
      if (!std::isfinite(*e.ts)) throw refuse("event " + std::to_string(i) + " has a 'ts' that is not finite");
      t0_ = std::min(t0_, *e.ts);
    }
    if (!e.has_ph || !e.has_name) return;
    const std::string& p = e.ph;
    const std::string& nm = e.name;
    static const std::string kLegacyCat = "cpu_op", kNoCat;
    Rec r;
    const std::string* cat_text = &kNoCat;
    if (p == "X") {
      if (e.cat_kind == ProfilerEvent::Cat::Absent && legacy_) cat_text = &kLegacyCat;  // the legacy layout: every event a CPU function
      else if (e.cat_kind == ProfilerEvent::Cat::Text) cat_text = &e.cat;
      if (!classify(*cat_text, nm, r)) return;
    } else if ((p == "i" || p == "I") && nm == "[memory]") {
      r.memory = true;
    } else {
      return;
    }
    // Names become ops.csv text, whose reader refuses a NUL byte (the parser has checked UTF-8).
    if (nm.find('\0') != std::string::npos)
      throw refuse("event " + std::to_string(i) + " has a 'name' holding a NUL byte: " + json_snippet(nlohmann::json(nm)));
    if (cat_text->find('\0') != std::string::npos)
      throw refuse("event " + std::to_string(i) + " has a 'cat' holding a NUL byte");
    if (!e.ts) throw refuse("event " + std::to_string(i) + " (" + nm + ") has no 'ts'");
    r.ts = *e.ts;
    if (!r.memory) {
      if (!e.dur || !(*e.dur >= 0) || !std::isfinite(*e.dur))
        throw refuse("event " + std::to_string(i) + " (" + nm + ") has no 'dur' of at least 0");
      r.dur = *e.dur;
    }
    r.tid_key = static_cast<std::int64_t>((e.pid << 32) ^ e.tid);
    using A = ProfilerEvent;
    if (r.memory) {
      r.device_type = e.args[A::DeviceType].value_or(1);
      r.device_id = e.args[A::DeviceId].value_or(0);
      r.addr = e.args[A::Addr].value_or(0);
      r.bytes = e.args[A::Bytes].value_or(0);
      r.total_reserved = e.args[A::TotalReserved].value_or(0);
    } else {
      const auto& x = e.args[A::ExternalId];
      const auto& c = e.args[A::Correlation];
      r.has_external = x.has_value(), r.external = x.value_or(0);
      r.has_correlation = c.has_value(), r.correlation = c.value_or(0);
      r.flops = e.args[A::Flops].value_or(0);
    }
    r.name = texts_.id(nm);
    if (!r.memory) r.cat = texts_.id(*cat_text);
    if (recs_.empty()) recs_.reserve(expected_);
    recs_.push_back(r);
  }

  Trace finish();

 private:
  const std::string& where_;
  static constexpr std::uint64_t kBytesPerEvent = 96;
  std::size_t expected_ = 0;
  const bool legacy_;  // the bare array of the legacy autograd profiler
  double t0_ = std::numeric_limits<double>::infinity();
  std::vector<Rec> recs_;
  Texts texts_;
};

// What the top of the document says (the events aside): RematLab's own trace, or no event list.
void check_top(const nlohmann::json& j, const Events& ev, const std::string& where) {
  if (j.is_object()) {
    auto od = j.find("otherData");
    auto fmt = od != j.end() && od->is_object() ? od->find("format") : j.end();
    if (od != j.end() && od->is_object() && fmt != od->end() && *fmt == "rematlab-chrome-trace")
      throw Error(where + ": a RematLab trace.json; open the run directory it belongs to instead");
    auto it = j.find("traceEvents");
    if (it == j.end() || !it->is_array()) throw ev.refuse("no 'traceEvents' array");
  } else if (!j.is_array()) {
    throw ev.refuse("a JSON " + std::string(j.type_name()) + ", not an object with 'traceEvents'");
  }
}

}  // namespace

Trace trace_from_profiler_json(const nlohmann::json& j, const std::string& where) {
  Events ev(where, j.is_array());
  check_top(j, ev, where);
  const nlohmann::json& list = j.is_object() ? *j.find("traceEvents") : j;
  for (std::size_t i = 0; i < list.size(); ++i) ev.add(i, profiler_event(list[i]));
  return ev.finish();
}

Trace import_profiler_trace(const std::string& path) {
  // Each event is read from the parse events as the parser has them, no JSON value built for it:
  // memory holds what is kept of each (a profile of 10^7 events is about 1 GB of JSON).
  // The streamed path says the layout: {} the legacy bare array, {"traceEvents"} Kineto's object.
  Events legacy(path, true), kineto(path, false);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
    for (Events* e : {&legacy, &kineto}) e->expect_bytes(static_cast<std::uint64_t>(st.st_size));
  std::exception_ptr first_error;
  ProfilerEventSax sax([&](std::size_t p, std::size_t i, const ProfilerEvent& e) {
    if (first_error) return;
    try {
      (p == 0 ? legacy : kineto).add(i, e);
    } catch (const Error&) {
      first_error = std::current_exception();  // reported after what the top says
    }
  });
  const nlohmann::json top = read_json_file_streaming(path, {{}, {"traceEvents"}}, sax);
  Events& ev = top.is_array() ? legacy : kineto;
  check_top(top, ev, path);
  if (first_error) std::rethrow_exception(first_error);
  return ev.finish();
}

namespace {

Trace Events::finish() {
  const std::string& where = where_;
  auto refuse = [this](const std::string& why) { return this->refuse(why); };
  const double t0 = t0_;
  std::vector<Rec>& recs = recs_;
  const Texts& texts = texts_;
  if (recs.empty())
    throw refuse("no cpu_op, kernel, cuda_runtime, gpu_memcpy or gpu_memset event and no [memory] instant");

  auto ns = [&](double us) -> std::int64_t {
    const double v = std::round((us - t0) * 1000.0);
    if (!(v >= 0) || v > static_cast<double>(limits::kClockNs)) throw refuse("its times span more than the run clock holds");
    return static_cast<std::int64_t>(v);
  };

  // Phases of the host side: per thread, each op takes its own marker's phase or the one of the
  // op around it; memory instants take the innermost op's phase and name.
  std::vector<Rec*> host;
  host.reserve(recs.size());
  for (auto& r : recs)
    if (r.memory || r.role != Role::Device) host.push_back(&r);
  std::stable_sort(host.begin(), host.end(), [](const Rec* a, const Rec* b) {
    if (a->tid_key != b->tid_key) return a->tid_key < b->tid_key;
    if (a->ts != b->ts) return a->ts < b->ts;
    return a->dur > b->dur;  // the outer op first
  });
  // What each name says of its phase, worked out once per name.
  std::vector<std::optional<Phase>> marker(texts.size());
  std::vector<bool> marker_known(texts.size());
  std::vector<Rec*> stack;
  std::int64_t tid = std::numeric_limits<std::int64_t>::min();
  for (Rec* r : host) {
    if (r->tid_key != tid) stack.clear(), tid = r->tid_key;
    while (!stack.empty() && !(r->memory ? r->ts <= stack.back()->ts + stack.back()->dur
                                         : nests_in(stack.back()->ts, stack.back()->ts + stack.back()->dur, r->ts,
                                                    r->ts + r->dur)))
      stack.pop_back();
    const Phase around = stack.empty() ? Phase::Forward : stack.back()->phase;
    if (r->memory) {
      r->phase = around;
      r->enclosing = stack.empty() ? kNoText : stack.back()->name;
      continue;
    }
    if (!marker_known[r->name]) marker[r->name] = marker_phase(texts[r->name]), marker_known[r->name] = true;
    r->phase = marker[r->name].value_or(around);
    stack.push_back(r);
  }
  // Device work takes the phase of the CPU op that launched it (External id), else of the
  // runtime call with its correlation id: the first such op in the file, its id looked up in ids
  // sorted once (a profile's ids mostly come in order).
  struct IdPhase { std::int64_t id; Phase phase; };
  std::vector<IdPhase> by_external, by_correlation;
  for (const auto& r : recs) {
    if (r.memory || r.role == Role::Device) continue;
    if (r.role == Role::CpuOp) {
      if (r.has_external && r.external >= 0) by_external.push_back({r.external, r.phase});
    } else {
      if (r.has_correlation && r.correlation >= 0) by_correlation.push_back({r.correlation, r.phase});
    }
  }
  const auto by_id = [](const IdPhase& a, const IdPhase& b) { return a.id < b.id; };
  std::stable_sort(by_external.begin(), by_external.end(), by_id);
  std::stable_sort(by_correlation.begin(), by_correlation.end(), by_id);
  const auto phase_of = [&](const std::vector<IdPhase>& ids, bool has, std::int64_t id) -> const Phase* {
    if (!has || id < 0) return nullptr;
    auto it = std::lower_bound(ids.begin(), ids.end(), IdPhase{id, Phase::Forward}, by_id);
    return it != ids.end() && it->id == id ? &it->phase : nullptr;
  };
  for (auto& r : recs) {
    if (r.memory || r.role != Role::Device) continue;
    if (const Phase* p = phase_of(by_external, r.has_external, r.external)) r.phase = *p;
    else if (const Phase* q = phase_of(by_correlation, r.has_correlation, r.correlation)) r.phase = *q;
  }

  Trace t = imported_trace("pytorch-profiler", where);
  t.provenance.emplace_back("profiler_layout", legacy_ ? "legacy autograd profiler (bare array)" : "kineto (traceEvents)");
  std::int64_t end_ns = 0;
  bool cuda = false;
  // The ops by start, the enclosing op before the ops it holds (ties in the order of the file):
  // their times first, so that each OpRecord is built once, in place.
  struct Span { std::int64_t start, end; std::uint32_t rec; };
  std::vector<Span> spans;
  spans.reserve(recs.size());
  for (std::size_t k = 0; k < recs.size(); ++k)
    if (!recs[k].memory)
      spans.push_back({ns(recs[k].ts), ns(recs[k].ts + recs[k].dur), static_cast<std::uint32_t>(k)});
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  t.ops.reserve(spans.size());
  for (const Span& sp : spans) {
    const Rec& r = recs[sp.rec];
    OpRecord& o = t.ops.emplace_back();
    o.start_ns = sp.start;
    o.end_ns = sp.end;
    o.stream = r.stream;
    const std::string &name = texts[r.name], &cat = texts[r.cat];
    o.name = !name.empty() ? name : !cat.empty() ? cat : "(unnamed)";
    o.op = cat;
    o.phase = r.phase;
    o.step = 0;
    o.flops = static_cast<std::uint64_t>(std::max<std::int64_t>(0, r.flops));
    const std::int64_t id = r.has_external ? r.external : r.has_correlation ? r.correlation : 0;
    o.op_id = static_cast<std::uint64_t>(std::max<std::int64_t>(0, id));
    end_ns = std::max(end_ns, o.end_ns);
    cuda = cuda || r.role == Role::Device;
  }

  // Memory: the GPU's events where there are any, else the CPU's (a CPU-only profile).
  std::vector<const Rec*> mem;
  bool any_gpu = false;
  for (const auto& r : recs)
    if (r.memory && r.device_type != 0) any_gpu = true;
  for (const auto& r : recs)
    if (r.memory && (r.device_type != 0) == any_gpu) mem.push_back(&r);
  std::stable_sort(mem.begin(), mem.end(), [](const Rec* a, const Rec* b) { return a->ts < b->ts; });
  cuda = cuda || any_gpu;
  t.device = cuda ? "cuda" : "cpu";
  NameTable names(t);
  struct Live { std::uint64_t id; std::int64_t size; std::uint32_t tensor; };
  std::unordered_map<std::uint64_t, Live> live;
  std::vector<MemoryEvent> baseline, events;
  std::uint64_t next_id = 0;
  for (std::size_t k = 0; k < mem.size(); ++k) {
    const Rec& r = *mem[k];
    auto at = [&r] { return "[memory] event at ts " + std::to_string(r.ts); };
    const std::int64_t bytes = r.bytes, addr = r.addr;
    if (bytes == 0) continue;
    if (bytes < -limits::kMemoryBytes || bytes > limits::kMemoryBytes)
      throw Error(where + ": " + at() + ": 'Bytes' " + std::to_string(bytes) + " is out of range");
    const std::uint64_t key = (static_cast<std::uint64_t>(r.device_id) << 56) ^
                              static_cast<std::uint64_t>(addr);
    MemoryEvent m;
    m.t_ns = ns(r.ts);
    m.step = 0;
    m.delta = bytes;
    m.category = Category::Unknown;
    m.phase = r.phase;
    m.space = Space::Device;
    m.reserved = static_cast<std::uint64_t>(std::clamp<std::int64_t>(r.total_reserved, 0, limits::kMemoryBytes));
    end_ns = std::max(end_ns, m.t_ns);
    if (bytes > 0) {
      if (live.count(key)) throw Error(where + ": " + at() + ": allocates at " + hex_address(addr) + ", which is allocated already");
      m.id = next_id++;
      const std::string& enclosing = texts[r.enclosing];
      m.tensor = names.id(enclosing.empty() ? "[memory] " + hex_address(addr) : enclosing);
      live.emplace(key, Live{m.id, bytes, m.tensor});
      events.push_back(m);
      continue;
    }
    auto it = live.find(key);
    if (it == live.end()) {  // allocated before the profile began: alive from its start
      MemoryEvent b = m;
      b.t_ns = 0;
      b.step = -1;
      b.id = next_id++;
      b.delta = -bytes;
      b.tensor = names.id("(before the profile) " + hex_address(addr));
      baseline.push_back(b);
      m.id = b.id;
      m.tensor = b.tensor;
      events.push_back(m);
      continue;
    }
    if (it->second.size != -bytes)
      throw Error(where + ": " + at() + ": frees " + std::to_string(-bytes) + " bytes at " + hex_address(addr) +
                  ", allocated with " + std::to_string(it->second.size));
    m.id = it->second.id;
    m.tensor = it->second.tensor;
    live.erase(it);
    events.push_back(m);
  }
  const std::uint64_t reserved0 = events.empty() ? 0 : events.front().reserved;
  for (auto& b : baseline) b.reserved = reserved0;
  t.events = std::move(baseline);
  t.events.insert(t.events.end(), events.begin(), events.end());
  finish_imported(t, end_ns);
  return t;
}

}  // namespace

}  // namespace remat
