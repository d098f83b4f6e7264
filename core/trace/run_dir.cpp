// Writing and reading run directories. The CSV tables hold every record of the trace; the
// summary holds every figure and the configuration; together they restore the Trace exactly.
#include "core/trace/run_dir.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <functional>
#include <exception>
#include <unistd.h>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/analysis/memory_timeline.h"
#include "core/trace/csv.h"
#include "core/trace/summary.h"
#include "core/trace/sweep_file.h"
#include "core/util/error.h"

namespace fs = std::filesystem;

namespace remat {

namespace {

const char* kEventsFile = "memory_events.csv";
const char* kTimelineFile = "memory_timeline.csv";
const char* kOpsFile = "ops.csv";
const char* kScheduleCsv = "schedule.csv";
const char* kLedgerFile = "ledger.csv";
const char* kLossFile = "loss.csv";

std::string join(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

std::optional<Stream> stream_from_string(std::string_view s) {
  for (int i = 0; i <= static_cast<int>(Stream::Host); ++i)
    if (s == to_string(static_cast<Stream>(i))) return static_cast<Stream>(i);
  return std::nullopt;
}

template <class E, class F>
E parse_enum(const csv::Reader& r, std::size_t c, F from, const char* what) {
  auto v = from(r.str(c));
  if (!v) r.fail(c, "unknown " + std::string(what) + " '" + std::string(r.str(c)) + "'");
  return *v;
}

Category cat_of(const csv::Reader& r, std::size_t c) {
  return parse_enum<Category>(r, c, category_from_string, "category");
}
Phase phase_of(const csv::Reader& r, std::size_t c) {
  return parse_enum<Phase>(r, c, phase_from_string, "phase");
}

// ------------------------------------------------------------------ the tables

void write_events(const Trace& t, const std::string& path) {
  csv::Writer w(path, {"t_ns", "step", "id", "delta_bytes", "category", "block", "tensor", "phase",
                       "space", "reserved_bytes", "op_seq"});
  static const std::string empty;
  for (const auto& e : t.events) {
    const std::string& nm = e.tensor < t.names.size() ? t.names[e.tensor] : empty;
    w.i64(e.t_ns).i64(e.step).u64(e.id).i64(e.delta).str(to_string(e.category)).i64(e.block)
        .str(nm).str(to_string(e.phase)).str(to_string(e.space)).u64(e.reserved).u64(e.op_seq);
    w.end_row();
  }
  w.commit();
}

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

void read_events(const std::string& path, Trace& t) {
  csv::Reader r(path);
  const std::size_t ct = r.col("t_ns"), cs = r.col("step"), cid = r.col("id"),
                    cd = r.col("delta_bytes"), cc = r.col("category"), cb = r.col("block"),
                    cn = r.col("tensor"), cp = r.col("phase"), csp = r.col("space"),
                    cr = r.col("reserved_bytes"), co = r.col("op_seq");
  std::unordered_map<std::string, std::uint32_t, StringHash, std::equal_to<>> ids;
  t.events.clear();
  t.names.clear();
  while (r.next()) {
    MemoryEvent e;
    e.t_ns = r.i64(ct);
    e.step = r.i32(cs);
    e.id = r.u64(cid);
    e.delta = r.i64(cd);
    e.category = cat_of(r, cc);
    e.block = r.i32(cb);
    std::string_view nm = r.str(cn);
    auto it = ids.find(nm);
    if (it == ids.end()) {
      it = ids.emplace(std::string(nm), static_cast<std::uint32_t>(t.names.size())).first;
      t.names.emplace_back(nm);
    }
    e.tensor = it->second;
    e.phase = phase_of(r, cp);
    e.space = parse_enum<Space>(r, csp, space_from_string, "space");
    e.reserved = r.u64(cr);
    e.op_seq = r.u64(co);
    if (e.delta == 0) r.fail(cd, "an event of 0 bytes");
    t.events.push_back(e);
  }
}

std::vector<std::string> timeline_header() {
  std::vector<std::string> h = {"t_ns", "event", "device_bytes", "host_bytes"};
  for (int c = 0; c < kNumCategories; ++c) h.push_back(to_string(static_cast<Category>(c)));
  return h;
}

void write_timeline(const Trace& t, const std::string& path) {
  csv::Writer w(path, timeline_header());
  for_each_timeline_point(t, [&w](const TimelinePoint& p) {
    w.i64(p.t_ns).i64(p.event).i64(p.device).i64(p.host);
    for (auto v : p.live) w.i64(v);
    w.end_row();
  });
  w.commit();
}

// The timeline is derived from the events; reading it back checks that it still agrees.
void check_timeline(const std::string& path, const Trace& t) {
  csv::Reader r(path);
  std::vector<std::size_t> cols;
  for (const auto& h : timeline_header()) cols.push_back(r.col(h));
  std::size_t rows = 0;
  bool ok = true;
  for_each_timeline_point(t, [&](const TimelinePoint& p) {
    if (!ok) return;
    if (!r.next()) {
      ok = false;
      return;
    }
    ++rows;
    std::int64_t want[4] = {p.t_ns, p.event, p.device, p.host};
    for (int i = 0; i < 4; ++i)
      if (r.i64(cols[i]) != want[i])
        r.fail(cols[i], "disagrees with memory_events.csv (expected " + std::to_string(want[i]) + ")");
    for (int c = 0; c < kNumCategories; ++c)
      if (r.i64(cols[4 + c]) != p.live[c])
        r.fail(cols[4 + c], "disagrees with memory_events.csv (expected " + std::to_string(p.live[c]) + ")");
  });
  if (!ok) throw Error(path + ": has " + std::to_string(rows) + " rows, memory_events.csv implies more (truncated?)");
  if (r.next()) throw Error(path + " line " + std::to_string(r.line()) + ": more rows than memory_events.csv implies");
}

void write_ops(const Trace& t, const std::string& path) {
  csv::Writer w(path, {"start_ns", "end_ns", "stream", "name", "op", "block", "phase", "step",
                       "flops", "bytes", "op_id"});
  for (const auto& o : t.ops) {
    w.i64(o.start_ns).i64(o.end_ns).str(to_string(o.stream)).str(o.name).str(o.op).i64(o.block)
        .str(to_string(o.phase)).i64(o.step).u64(o.flops).u64(o.bytes).u64(o.op_id);
    w.end_row();
  }
  w.commit();
}

void read_ops(const std::string& path, Trace& t) {
  csv::Reader r(path);
  const std::size_t cs = r.col("start_ns"), ce = r.col("end_ns"), cst = r.col("stream"),
                    cn = r.col("name"), co = r.col("op"), cb = r.col("block"), cp = r.col("phase"),
                    cstep = r.col("step"), cf = r.col("flops"), cby = r.col("bytes"),
                    cid = r.col("op_id");
  t.ops.clear();
  while (r.next()) {
    OpRecord o;
    o.start_ns = r.i64(cs);
    o.end_ns = r.i64(ce);
    if (o.end_ns < o.start_ns) r.fail(ce, "ends before it starts");
    o.stream = parse_enum<Stream>(r, cst, stream_from_string, "stream");
    o.name = r.str(cn);
    o.op = r.str(co);
    o.block = r.i32(cb);
    o.phase = phase_of(r, cp);
    o.step = r.i32(cstep);
    o.flops = r.u64(cf);
    o.bytes = r.u64(cby);
    o.op_id = r.u64(cid);
    t.ops.push_back(std::move(o));
  }
}

void write_schedule_csv(const Trace& t, const std::string& path) {
  csv::Writer w(path, {"index", "action", "block", "keep", "phase", "start_ns", "end_ns", "step"});
  for (const auto& s : t.schedule_records) {
    w.u64(s.index).str(s.action).i64(s.block).str(s.keep).str(to_string(s.phase)).i64(s.start_ns)
        .i64(s.end_ns).i64(s.step);
    w.end_row();
  }
  w.commit();
}

void read_schedule_csv(const std::string& path, Trace& t) {
  csv::Reader r(path);
  const std::size_t ci = r.col("index"), ca = r.col("action"), cb = r.col("block"),
                    ck = r.col("keep"), cp = r.col("phase"), cs = r.col("start_ns"),
                    ce = r.col("end_ns"), cstep = r.col("step");
  t.schedule_records.clear();
  while (r.next()) {
    ScheduleRecord s;
    s.index = r.u64(ci);
    s.action = r.str(ca);
    s.block = r.i32(cb);
    s.keep = r.str(ck);
    s.phase = phase_of(r, cp);
    s.start_ns = r.i64(cs);
    s.end_ns = r.i64(ce);
    s.step = r.i32(cstep);
    t.schedule_records.push_back(std::move(s));
  }
}

void write_ledger(const Trace& t, const std::string& path) {
  csv::Writer w(path, {"block", "tensor", "bytes", "category", "created_phase", "created_ns",
                       "freed_ns", "decision", "alloc_id", "free_id"});
  for (const auto& l : t.ledger) {
    w.i64(l.block).str(l.tensor).u64(l.bytes).str(to_string(l.category)).str(to_string(l.created))
        .i64(l.created_ns).i64(l.freed_ns).str(l.decision).u64(l.alloc_id).u64(l.free_id);
    w.end_row();
  }
  w.commit();
}

void read_ledger(const std::string& path, Trace& t) {
  csv::Reader r(path);
  const std::size_t cb = r.col("block"), ct = r.col("tensor"), cby = r.col("bytes"),
                    cc = r.col("category"), cp = r.col("created_phase"), ccr = r.col("created_ns"),
                    cf = r.col("freed_ns"), cd = r.col("decision"), ca = r.col("alloc_id"),
                    cfi = r.col("free_id");
  t.ledger.clear();
  while (r.next()) {
    LedgerEntry l;
    l.block = r.i32(cb);
    l.tensor = r.str(ct);
    l.bytes = r.u64(cby);
    l.category = cat_of(r, cc);
    l.created = phase_of(r, cp);
    l.created_ns = r.i64(ccr);
    l.freed_ns = r.i64(cf);
    l.decision = r.str(cd);
    l.alloc_id = r.u64(ca);
    l.free_id = r.u64(cfi);
    t.ledger.push_back(std::move(l));
  }
}

void write_loss(const Trace& t, const std::string& path) {
  csv::Writer w(path, {"step", "counted", "loss", "time_ms", "peak_bytes", "reserved_bytes",
                       "start_ns", "end_ns"});
  for (const auto& s : t.step_stats) {
    w.i64(s.step).i64(s.counted ? 1 : 0).f64(s.loss).f64(s.time_ms).u64(s.peak_bytes)
        .u64(s.reserved_bytes).i64(s.start_ns).i64(s.end_ns);
    w.end_row();
  }
  w.commit();
}

void read_loss(const std::string& path, Trace& t) {
  csv::Reader r(path);
  const std::size_t cs = r.col("step"), cc = r.col("counted"), cl = r.col("loss"),
                    ct = r.col("time_ms"), cp = r.col("peak_bytes"), cr = r.col("reserved_bytes"),
                    cst = r.col("start_ns"), ce = r.col("end_ns");
  t.step_stats.clear();
  while (r.next()) {
    StepStats s;
    s.step = r.i32(cs);
    auto counted = r.i64(cc);
    if (counted != 0 && counted != 1) r.fail(cc, "must be 0 or 1");
    s.counted = counted == 1;
    s.loss = r.f64(cl);
    s.time_ms = r.f64(ct);
    s.peak_bytes = r.u64(cp);
    s.reserved_bytes = r.u64(cr);
    s.start_ns = r.i64(cst);
    s.end_ns = r.i64(ce);
    t.step_stats.push_back(s);
  }
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  csv::OutFile f(path);
  f.write(j.dump(2));
  f.put('\n');
  f.commit();
}

// ------------------------------------------------------------------ summary.json back to a Trace

class JsonFields {
 public:
  JsonFields(const nlohmann::json& j, std::string file) : j_(j), file_(std::move(file)) {}
  const nlohmann::json& at(const char* key, nlohmann::json::value_t want) const {
    auto it = j_.find(key);
    if (it == j_.end()) throw Error(file_ + ": missing field '" + key + "'");
    bool ok = it->type() == want ||
              (want == nlohmann::json::value_t::number_float && it->is_number()) ||
              (want == nlohmann::json::value_t::number_integer && it->is_number_integer()) ||
              (want == nlohmann::json::value_t::number_unsigned && it->is_number_unsigned());
    if (!ok) throw Error(file_ + ": field '" + key + "' has the wrong type (" + it->type_name() + ")");
    return *it;
  }
  std::string str(const char* k) const { return at(k, nlohmann::json::value_t::string).get<std::string>(); }
  std::uint64_t u64(const char* k) const { return at(k, nlohmann::json::value_t::number_unsigned).get<std::uint64_t>(); }
  std::int64_t i64(const char* k) const { return at(k, nlohmann::json::value_t::number_integer).get<std::int64_t>(); }
  int i32(const char* k) const { return static_cast<int>(i64(k)); }
  bool boolean(const char* k) const { return at(k, nlohmann::json::value_t::boolean).get<bool>(); }
  const nlohmann::json& obj(const char* k) const { return at(k, nlohmann::json::value_t::object); }
  const nlohmann::json& arr(const char* k) const { return at(k, nlohmann::json::value_t::array); }
  std::vector<std::uint64_t> u64s(const char* k) const {
    std::vector<std::uint64_t> v;
    for (const auto& x : arr(k)) {
      if (!x.is_number_unsigned()) throw Error(file_ + ": field '" + k + "' must hold non-negative integers");
      v.push_back(x.get<std::uint64_t>());
    }
    return v;
  }
  JsonFields sub(const char* k) const { return JsonFields(obj(k), file_ + " '" + k + "'"); }
  const std::string& file() const { return file_; }

 private:
  const nlohmann::json& j_;
  std::string file_;
};

void trace_from_summary(const nlohmann::json& j, const std::string& file, Trace& t) {
  if (!j.is_object()) throw Error(file + ": not a JSON object");
  JsonFields f(j, file);
  if (f.str("format") != "rematlab-run") throw Error(file + ": not a RematLab run summary (format '" + f.str("format") + "')");
  t.format_version = f.i32("format_version");
  if (t.format_version < 1 || t.format_version > kTraceFormatVersion)
    throw Error(file + ": format version " + std::to_string(t.format_version) +
                " is not supported (this program reads version " + std::to_string(kTraceFormatVersion) +
                "; written by a newer RematLab?)");
  t.complete = f.boolean("complete");
  t.status = f.str("status");
  t.error = j.contains("error") ? f.str("error") : std::string();
  try {
    t.model = model_from_json(f.obj("model"));
  } catch (const Error& e) {
    throw Error(file + ": model: " + e.what());
  }
  t.policy = f.str("policy");
  t.policy_params = f.str("policy_params");
  t.memory_budget = f.u64("memory_budget_bytes");
  t.device = f.str("device");
  t.seed = f.u64("seed");
  t.warmup = f.i32("warmup");
  t.steps = f.i32("steps");
  t.peak_bytes = f.u64("peak_bytes");
  t.predicted_peak_bytes = f.u64("predicted_peak_bytes");
  t.peak_reserved_bytes = f.u64("peak_reserved_bytes");
  t.static_bytes = f.u64("static_bytes");
  t.activation_peak_bytes = f.u64("activation_peak_bytes");
  t.saved_bytes_per_block = f.u64s("saved_bytes_per_block");
  t.host_bytes_per_block = f.u64s("host_bytes_per_block");
  JsonFields fl = f.sub("flops");
  t.flops = {fl.u64("forward"), fl.u64("recompute"), fl.u64("backward"), fl.u64("other")};
  t.block_forwards = f.u64("block_forwards");
  JsonFields pl = f.sub("plan");
  t.plan.block_forwards = pl.u64("block_forwards");
  t.plan.flops_recompute = pl.u64("recompute_flops");
  t.plan.max_checkpoints = pl.i32("max_checkpoints");
  t.plan.first_forwards = pl.u64("first_forwards");
  t.plan.flops_forward = pl.u64("forward_flops");
  t.plan.flops_backward = pl.u64("backward_flops");
  t.plan.offloads = pl.u64("offloads");
  t.plan.prefetches = pl.u64("prefetches");
  std::string ck = f.str("grad_checksum");
  auto r = std::from_chars(ck.data(), ck.data() + ck.size(), t.grad_checksum, 16);
  if (ck.empty() || r.ec != std::errc() || r.ptr != ck.data() + ck.size())
    throw Error(file + ": field 'grad_checksum' is not hexadecimal ('" + ck + "')");
  t.profiler_overhead_ns = f.i64("profiler_overhead_ns");
  t.peak_tensors.clear();
  for (const auto& x : f.arr("peak_tensors")) {
    JsonFields p(x, file + " 'peak_tensors'");
    if (!x.is_object()) throw Error(file + ": 'peak_tensors' must hold objects");
    t.peak_tensors.emplace_back(p.str("tensor"), p.u64("bytes"));
  }
  t.provenance.clear();
  for (const auto& [k, v] : f.obj("provenance").items())
    t.provenance.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
  JsonFields tl = f.sub("timeline");
  t.step_first_event = tl.u64("first_event");
  t.step_end_event = tl.u64("end_event");
  t.step_start_ns = tl.i64("start_ns");
  t.step_end_ns = tl.i64("end_ns");
}

// Checks what the summary says against the tables it came with.
void cross_check(const nlohmann::json& j, const std::string& dir, const Trace& t) {
  const std::string file = join(dir, kSummaryFile);
  if (j.contains("files")) {
    const auto& files = j["files"];
    if (!files.is_object()) throw Error(file + ": 'files' must be an object");
    auto rows = csv_table_rows(t);
    const auto& names = csv_table_files();
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (!files.contains(names[i])) continue;
      const auto& e = files[names[i]];
      if (!e.is_object() || !e.contains("rows") || !e["rows"].is_number_unsigned())
        throw Error(file + ": 'files' entry for " + names[i] + " has no row count");
      auto want = e["rows"].get<std::uint64_t>();
      if (want != rows[i])
        throw Error(join(dir, names[i].c_str()) + ": " + std::to_string(rows[i]) + " data rows, summary.json says " +
                    std::to_string(want) + " (truncated or edited?)");
    }
  }
  if (t.step_first_event > t.events.size() || t.step_end_event > t.events.size())
    throw Error(file + ": 'timeline' points past the " + std::to_string(t.events.size()) +
                " rows of memory_events.csv (truncated?)");
  // The counted losses and step times in the summary come from loss.csv.
  auto losses = t.losses();
  auto times = t.step_times_ms();
  const auto& jl = j.at("loss");
  const auto& jt = j.at("step_time_ms");
  if (!jl.is_array() || jl.size() != losses.size() || !jt.is_array() || jt.size() != times.size())
    throw Error(join(dir, kLossFile) + ": its counted steps do not match summary.json");
  for (std::size_t i = 0; i < losses.size(); ++i) {
    bool loss_ok = jl[i].is_null() ? std::isnan(losses[i]) : (jl[i].is_number() && jl[i].get<double>() == losses[i]);
    bool time_ok = jt[i].is_number() && jt[i].get<double>() == times[i];
    if (!loss_ok || !time_ok)
      throw Error(join(dir, kLossFile) + ": counted step " + std::to_string(i) + " disagrees with summary.json");
  }
}

// Runs independent file jobs on their own threads (the big tables take about the same time);
// rethrows the first error after every job has finished.
void in_parallel(const std::vector<std::function<void()>>& jobs) {
  std::vector<std::exception_ptr> errors(jobs.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < jobs.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        jobs[i]();
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  if (!jobs.empty()) {
    try {
      jobs[0]();
    } catch (...) {
      errors[0] = std::current_exception();
    }
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

bool is_dir_with(const fs::path& p, const char* file) {
  std::error_code ec;
  return fs::is_regular_file(p / file, ec);
}

fs::path normal_target(const std::string& dir) {
  if (dir.empty()) throw Error("empty output directory name");
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  if (p.empty() || p == "." || p == "..") throw Error("'" + dir + "' cannot be used as an output directory");
  return p;
}

}  // namespace

// ------------------------------------------------------------------ public

nlohmann::json read_json_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(path + ": missing");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number out of range
    throw Error(path + ": not valid JSON (truncated or corrupt): " + e.what());
  }
}

const std::vector<std::string>& csv_table_files() {
  static const std::vector<std::string> f = {kEventsFile, kTimelineFile, kOpsFile,
                                             kScheduleCsv, kLedgerFile, kLossFile};
  return f;
}

std::vector<std::size_t> csv_table_rows(const Trace& t) {
  TimelineRange r = timeline_range(t);
  return {t.events.size(), r.end - r.first + 2, t.ops.size(), t.schedule_records.size(),
          t.ledger.size(), t.step_stats.size()};
}

namespace {

std::vector<std::function<void()>> table_jobs(const Trace& t, const std::string& dir) {
  return {[&t, dir] { write_events(t, join(dir, kEventsFile)); },
          [&t, dir] { write_timeline(t, join(dir, kTimelineFile)); },
          [&t, dir] { write_ops(t, join(dir, kOpsFile)); },
          [&t, dir] {
            write_schedule_csv(t, join(dir, kScheduleCsv));
            write_ledger(t, join(dir, kLedgerFile));
            write_loss(t, join(dir, kLossFile));
          }};
}

}  // namespace

void write_csv_tables(const Trace& t, const std::string& dir) { in_parallel(table_jobs(t, dir)); }

void check_output_dir(const std::string& dir, bool force) {
  fs::path p = normal_target(dir);
  std::error_code ec;
  auto st = fs::symlink_status(p, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) throw Error("'" + dir + "' exists and is not a directory");
    if (!force) throw Error("'" + dir + "' exists; use --force to replace it");
    bool empty = fs::is_empty(p, ec);
    if (!empty && !is_dir_with(p, kSummaryFile) && !is_dir_with(p, kSweepFile))
      throw Error("'" + dir + "' exists and is not a RematLab run or sweep directory; refusing to replace it even with --force");
  }
  // The parent must exist (or be creatable) and take a new directory.
  std::string tmp = make_temp_dir(dir);
  fs::remove_all(tmp, ec);
}

std::string make_temp_dir(const std::string& dir) {
  fs::path p = normal_target(dir);
  fs::path parent = p.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw Error("cannot write '" + dir + "': cannot create '" + parent.string() + "': " + ec.message());
  std::random_device rd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    fs::path tmp = parent / ("." + p.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                             std::to_string(rd() % 1000000));
    if (fs::create_directory(tmp, ec)) return tmp.string();
    if (ec && ec != std::errc::file_exists)
      throw Error("cannot write '" + dir + "': cannot create a directory in '" + parent.string() + "': " + ec.message());
  }
  throw Error("cannot make a temporary directory next to '" + dir + "'");
}

void commit_temp_dir(const std::string& tmp, const std::string& dir) {
  fs::path p = normal_target(dir);
  std::error_code ec;
  fs::path old;
  if (fs::exists(fs::symlink_status(p, ec))) {
    old = p.parent_path() / ("." + p.filename().string() + ".old-" + std::to_string(::getpid()));
    if (p.parent_path().empty()) old = old.filename();
    fs::remove_all(old, ec);
    fs::rename(p, old, ec);
    if (ec) {
      fs::remove_all(tmp, ec);
      throw Error("cannot replace '" + dir + "': " + ec.message());
    }
  }
  fs::rename(tmp, p, ec);
  if (ec) {
    std::string why = ec.message();
    if (!old.empty()) fs::rename(old, p, ec);
    fs::remove_all(tmp, ec);
    throw Error("cannot write '" + dir + "': " + why);
  }
  if (!old.empty()) fs::remove_all(old, ec);
}

void write_run_dir(const Trace& t, const std::string& dir, bool force) {
  check_output_dir(dir, force);
  std::string tmp = make_temp_dir(dir);
  try {
    nlohmann::json s = summary_json(t);
    auto rows = csv_table_rows(t);
    nlohmann::json files = nlohmann::json::object();
    for (std::size_t i = 0; i < rows.size(); ++i) files[csv_table_files()[i]] = {{"rows", rows[i]}};
    files[kChromeTraceFile] = nlohmann::json::object();
    files[kScheduleFile] = nlohmann::json::object();
    s["files"] = files;
    auto jobs = table_jobs(t, tmp);
    jobs.insert(jobs.begin(), [&t, &tmp] { write_chrome_trace(t, join(tmp, kChromeTraceFile)); });
    jobs.push_back([&t, &tmp] { write_json_file(join(tmp, kScheduleFile), schedule_to_json(t.schedule)); });
    in_parallel(jobs);
    write_json_file(join(tmp, kSummaryFile), s);  // last: a directory with it is whole
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  commit_temp_dir(tmp, dir);
}

Trace read_run_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw Error("run directory '" + dir + "' does not exist");
  if (!fs::is_directory(dir, ec)) throw Error("'" + dir + "' is not a directory");
  if (!fs::exists(join(dir, kSummaryFile), ec))
    throw Error("'" + dir + "' is not a run directory (no summary.json)");
  Trace t;
  const std::string sfile = join(dir, kSummaryFile);
  nlohmann::json j = read_json_file(sfile);
  try {
    trace_from_summary(j, sfile, t);
  } catch (const nlohmann::json::exception& e) {
    throw Error(sfile + ": " + e.what());
  }
  try {
    t.schedule = schedule_from_json(read_json_file(join(dir, kScheduleFile)));
  } catch (const nlohmann::json::exception& e) {
    throw Error(join(dir, kScheduleFile) + ": " + e.what());
  } catch (const Error& e) {
    std::string w = e.what();
    if (w.rfind(join(dir, kScheduleFile), 0) == 0) throw;
    throw Error(join(dir, kScheduleFile) + ": " + w);
  }
  // Each job fills its own fields of t. Errors come back in file order below.
  // The timeline is derived from the events: checked when present (right after the events,
  // once they agree with the summary), regenerated by export.
  auto events_then_timeline = [&] {
    read_events(join(dir, kEventsFile), t);
    const auto& files = j.contains("files") && j["files"].is_object() ? j["files"] : nlohmann::json::object();
    auto it = files.find(kEventsFile);
    if (it != files.end() && it->is_object() && it->contains("rows") && (*it)["rows"].is_number_unsigned() &&
        (*it)["rows"].get<std::uint64_t>() != t.events.size())
      throw Error(join(dir, kEventsFile) + ": " + std::to_string(t.events.size()) + " data rows, summary.json says " +
                  std::to_string((*it)["rows"].get<std::uint64_t>()) + " (truncated or edited?)");
    if (t.step_first_event > t.events.size() || t.step_end_event > t.events.size())
      throw Error(sfile + ": 'timeline' points past the " + std::to_string(t.events.size()) +
                  " rows of memory_events.csv (truncated?)");
    std::error_code tec;
    if (fs::exists(join(dir, kTimelineFile), tec)) check_timeline(join(dir, kTimelineFile), t);
  };
  in_parallel({events_then_timeline,
               [&] { read_ops(join(dir, kOpsFile), t); },
               [&] {
                 read_schedule_csv(join(dir, kScheduleCsv), t);
                 read_ledger(join(dir, kLedgerFile), t);
                 read_loss(join(dir, kLossFile), t);
               }});
  try {
    cross_check(j, dir, t);
  } catch (const nlohmann::json::exception& e) {
    throw Error(sfile + ": " + e.what());
  }
  return t;
}

}  // namespace remat
