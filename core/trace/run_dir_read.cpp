// Reading a run directory back: the summary and the schedule first, then the tables against
// the schema with the ranges the summary sets (model.layers, the steps), then the files against
// each other.
#include "core/analysis/block_names.h"
#include "core/trace/run_dir_read.h"

#include <charconv>
#include <cmath>
#include <algorithm>
#include <filesystem>
#include <tuple>
#include <unordered_map>

#include "core/analysis/memory_timeline.h"
#include "core/graph/block_graph.h"
#include "core/graph/parallel_layout.h"
#include "core/trace/run_dir.h"
#include "core/trace/schema.h"
#include "core/trace/table_reader.h"
#include "core/util/error.h"
#include "core/util/json_io.h"
#include "core/util/limits.h"

namespace fs = std::filesystem;

namespace remat::run_dir_read {

namespace {

// The blocks of a pipeline stage's rank (provenance `stage_blocks`, 1 to model.layers), or 0.
int stage_blocks(const Trace& t) {
  if (provenance_int(t, "pp_world_size", 1) <= 1) return 0;
  const int b = provenance_int(t, "stage_blocks", 0);
  return b >= 1 && b <= t.model.layers ? b : 0;
}

using schema::kEventsFile;
using schema::kLedgerFile;
using schema::kLossFile;
using schema::kOpsFile;
using schema::kRoutingFile;
using schema::kScheduleCsv;
using schema::kTimelineFile;

std::string join(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

TableContext context_of(const Trace& t) {
  return {t.format_version, t.model.layers, std::int64_t{t.warmup} + t.steps};
}

TableReader open_table(const std::string& dir, const char* file, const Trace& t) {
  return TableReader(join(dir, file), schema::table(file), context_of(t));
}

// ------------------------------------------------------------------ summary.json

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
  int i32(const char* k) const { return checked_narrow<int>(i64(k), file_ + " field '" + k + "'"); }
  double num(const char* k) const { return at(k, nlohmann::json::value_t::number_float).get<double>(); }
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

 private:
  const nlohmann::json& j_;
  std::string file_;
};

void trace_from_summary(const nlohmann::json& j, const std::string& file, Trace& t) {
  JsonFields f(j, file);
  t.source = t.format_version >= 2 ? f.str("source") : std::string(kOwnSource);
  bool known_source = false;
  for (auto s : kTraceSources) known_source = known_source || t.source == s;
  if (!known_source) throw Error(file + ": field 'source' is " + json_snippet(j["source"]) + ", not a source RematLab knows");
  t.complete = f.boolean("complete");
  t.status = f.str("status");
  bool known = false;
  for (auto s : schema::status_values()) known = known || s == t.status;
  if (!known) throw Error(file + ": field 'status' is " + json_snippet(j["status"]) + ", not a run's status");
  if (t.complete != (t.status == "ok"))
    throw Error(file + ": 'complete' is " + (t.complete ? "true" : "false") + " but 'status' is '" + t.status + "'");
  t.error = j.contains("error") ? f.str("error") : std::string();
  try {
    t.model = model_from_json(f.obj("model"));
  } catch (const Error& e) {
    throw Error(file + ": model: " + e.what());
  }
  // Version 4 on: the fields of an imported config that changed nothing; none before.
  if (t.format_version >= 4)
    for (const auto& x : f.arr("ignored_config_fields")) {
      if (!x.is_string()) throw Error(file + ": field 'ignored_config_fields' must hold strings");
      t.model.ignored_fields.push_back(x.get<std::string>());
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
  std::uint64_t total = 0;
  bool wrapped = false;
  for (auto x : {t.flops.forward, t.flops.recompute, t.flops.backward, t.flops.other})
    wrapped = __builtin_add_overflow(total, x, &total) || wrapped;
  if (wrapped || total != fl.u64("total"))
    throw Error(file + ": field 'flops.total' is " + std::to_string(fl.u64("total")) +
                ", not the sum of forward, recompute, backward and other");
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
    throw Error(file + ": field 'grad_checksum' is not hexadecimal (" + json_snippet(j["grad_checksum"]) + ")");
  t.profiler_overhead_ns = f.i64("profiler_overhead_ns");
  t.startup_ms = j.contains("startup_ms") ? f.num("startup_ms") : 0.0;
  t.startup_breakdown_ms.clear();
  if (j.contains("startup_breakdown_ms"))
    for (const auto& [part, ms] : j["startup_breakdown_ms"].items()) {
      if (!ms.is_number())
        throw Error(file + ": field 'startup_breakdown_ms." + part + "' must be a number, got " + json_snippet(ms));
      t.startup_breakdown_ms.emplace_back(part, ms.get<double>());
    }
  t.peak_tensors.clear();
  std::size_t n = 0;
  for (const auto& x : f.arr("peak_tensors")) {
    const std::string where = file + " 'peak_tensors' entry " + std::to_string(n++);
    schema::check_fields(x, schema::peak_tensor_fields(), t.format_version, where);
    JsonFields p(x, where);
    t.peak_tensors.emplace_back(p.str("tensor"), p.u64("bytes"));
  }
  t.provenance.clear();
  for (const auto& [k, v] : f.obj("provenance").items())
    t.provenance.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
  // A pipeline stage's rank has its stage's blocks (provenance `stage_blocks`), the others all.
  const int stage = stage_blocks(t);
  const auto layers = static_cast<std::size_t>(stage > 0 ? stage : t.model.layers);
  for (const char* k : {"saved_bytes_per_block", "host_bytes_per_block"})
    if (!j[k].empty() && j[k].size() != layers)
      throw Error(file + ": field '" + k + "' has " + std::to_string(j[k].size()) + " entries, " +
                  (stage > 0 ? "the stage's blocks are " : "model.layers is ") + std::to_string(layers));
  JsonFields tl = f.sub("timeline");
  t.step_first_event = tl.u64("first_event");
  t.step_end_event = tl.u64("end_event");
  t.step_start_ns = tl.i64("start_ns");
  t.step_end_ns = tl.i64("end_ns");
  if (t.step_end_event != 0 && t.step_end_event < t.step_first_event)
    throw Error(file + ": 'timeline' end_event " + std::to_string(t.step_end_event) + " is before first_event " +
                std::to_string(t.step_first_event));
  if (t.step_end_ns < t.step_start_ns)
    throw Error(file + ": 'timeline' end_ns " + std::to_string(t.step_end_ns) + " is before start_ns " +
                std::to_string(t.step_start_ns));
}

// The summary's row count of `name`, checked against `rows` (read). A version that lists the
// files must list every table.
void check_rows(const std::string& dir, const nlohmann::json& j, const std::string& name, std::size_t rows) {
  if (!j.contains("files")) return;  // a version without 'files' (schema::summary_fields)
  const auto& files = j["files"];
  auto it = files.find(name);
  if (it == files.end())
    throw Error(join(dir, kSummaryFile) + ": 'files' has no entry for " + name + " (its row count)");
  if (!it->is_object() || !it->contains("rows") || !(*it)["rows"].is_number_unsigned())
    throw Error(join(dir, kSummaryFile) + ": 'files' entry for " + name + " has no row count (" + json_snippet(*it) + ")");
  const auto want = (*it)["rows"].get<std::uint64_t>();
  if (want > limits::kTableRows)
    throw LimitError(join(dir, kSummaryFile) + ": 'files' says " + name + " has " + std::to_string(want) +
                     " rows, more than the " + std::to_string(limits::kTableRows) + " a table may have");
  if (want != rows)
    throw Error(join(dir, name.c_str()) + ": " + std::to_string(rows) + " data rows, summary.json says " +
                std::to_string(want) + " (truncated or edited?)");
}

// ------------------------------------------------------------------ the tables

void read_events(const std::string& dir, Trace& t) {
  TableReader r = open_table(dir, kEventsFile, t);
  const std::size_t ct = r.col("t_ns"), cs = r.col("step"), cid = r.col("id"), cd = r.col("delta_bytes"),
                    cc = r.col("category"), cb = r.col("block"), cn = r.col("tensor"), cp = r.col("phase"),
                    csp = r.col("space"), cr = r.col("reserved_bytes"), co = r.col("op_seq");
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::uint32_t, StringHash, std::equal_to<>> ids;
  // Live bytes per category and per space: never below 0 nor above limits::kMemoryBytes, so
  // every sum of the timeline (memory_timeline.h) stays in range.
  std::int64_t live[kNumCategories] = {}, space[2] = {};
  t.events.clear();
  t.names.clear();
  while (r.next()) {
    MemoryEvent e;
    e.t_ns = r.i64(ct);
    e.step = static_cast<std::int32_t>(r.i64(cs));
    e.id = r.u64(cid);
    e.delta = r.i64(cd);
    e.category = static_cast<Category>(r.enum_index(cc));
    if (e.category == Category::Unknown && t.format_version < 2)
      r.fail(cc, "'unknown' is a category of format version 2 on, this file is version " +
                     std::to_string(t.format_version));
    e.block = static_cast<std::int32_t>(r.i64(cb));
    std::string_view nm = r.str(cn);
    auto it = ids.find(nm);
    if (it == ids.end()) {
      it = ids.emplace(std::string(nm), static_cast<std::uint32_t>(t.names.size())).first;
      t.names.emplace_back(nm);
    }
    e.tensor = it->second;
    e.phase = static_cast<Phase>(r.enum_index(cp));
    e.space = static_cast<Space>(r.enum_index(csp));
    e.reserved = r.u64(cr);
    e.op_seq = r.u64(co);
    std::int64_t& c = live[static_cast<int>(e.category)];
    std::int64_t& s = space[static_cast<int>(e.space)];
    c += e.delta;  // |delta| and the sums are at most limits::kMemoryBytes: no overflow
    s += e.delta;
    if (c < 0 || s < 0)
      r.fail(cd, std::to_string(e.delta) + " frees more than is live (" + std::to_string(c - e.delta) + " bytes of " +
                     to_string(e.category) + ", " + std::to_string(s - e.delta) + " in " + to_string(e.space) + ")");
    if (c > limits::kMemoryBytes || s > limits::kMemoryBytes)
      r.fail(cd, std::to_string(e.delta) + " takes the live bytes of " + to_string(e.category) + " past " +
                     std::to_string(limits::kMemoryBytes));
    t.events.push_back(e);
  }
}

// The timeline is derived from the events; read back, it must still agree with them.
void check_timeline(const std::string& dir, const Trace& t) {
  TableReader r = open_table(dir, kTimelineFile, t);
  const auto& cols = schema::table(kTimelineFile).columns;
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
    for (std::size_t k = 0; k < cols.size(); ++k) {
      if (!r.has(k)) continue;  // a column of a newer version (its category is empty: read_events)
      const std::int64_t w = k < 4 ? want[k] : p.live[k - 4];
      if (r.i64(k) != w) r.fail(k, "disagrees with memory_events.csv (expected " + std::to_string(w) + ")");
    }
  });
  const std::string path = join(dir, kTimelineFile);
  if (!ok) throw Error(path + ": has " + std::to_string(rows) + " rows, memory_events.csv implies more (truncated?)");
  if (r.next()) throw Error(path + " line " + std::to_string(r.line()) + ": more rows than memory_events.csv implies");
}

void read_ops(const std::string& dir, Trace& t) {
  TableReader r = open_table(dir, kOpsFile, t);
  const std::size_t cs = r.col("start_ns"), ce = r.col("end_ns"), cst = r.col("stream"), cn = r.col("name"),
                    co = r.col("op"), cb = r.col("block"), cp = r.col("phase"), cstep = r.col("step"),
                    cf = r.col("flops"), cby = r.col("bytes"), cid = r.col("op_id"), cr = r.col("ranks");
  const bool with_ranks = r.has(cr);  // version 3 on; before it no op said its group
  std::string why;
  t.ops.clear();
  while (r.next()) {
    OpRecord o;
    o.start_ns = r.i64(cs);
    o.end_ns = r.i64(ce);
    o.stream = static_cast<Stream>(r.enum_index(cst));
    o.name = r.str(cn);
    o.op = r.str(co);
    o.block = static_cast<std::int32_t>(r.i64(cb));
    o.phase = static_cast<Phase>(r.enum_index(cp));
    o.step = static_cast<std::int32_t>(r.i64(cstep));
    o.flops = r.u64(cf);
    o.bytes = r.u64(cby);
    o.op_id = r.u64(cid);
    if (with_ranks) {
      if (!parse_ranks(r.str(cr), o.ranks, why)) r.fail(cr, quote_field(r.str(cr)) + ": " + why);
      if (o.stream != Stream::Comm && !o.ranks.empty())
        r.fail(cr, quote_field(r.str(cr)) + " on an op of stream " + to_string(o.stream) +
                       " (only collectives, stream comm, have ranks)");
    }
    t.ops.push_back(std::move(o));
  }
}

// Each row is an action of schedule.json (read first): the same action on the same block.
void read_schedule_csv(const std::string& dir, Trace& t) {
  TableReader r = open_table(dir, kScheduleCsv, t);
  const std::size_t ci = r.col("index"), ca = r.col("action"), cb = r.col("block"), ck = r.col("keep"),
                    cp = r.col("phase"), cs = r.col("start_ns"), ce = r.col("end_ns"), cstep = r.col("step");
  const auto& actions = t.schedule.actions;
  t.schedule_records.clear();
  while (r.next()) {
    ScheduleRecord s;
    if (r.u64(ci) >= actions.size())
      r.fail(ci, std::to_string(r.u64(ci)) + " is past the " + std::to_string(actions.size()) +
                     " actions of schedule.json");
    s.index = static_cast<std::size_t>(r.u64(ci));
    s.action = r.str(ca);
    s.block = static_cast<int>(r.i64(cb));
    const Action& a = actions[s.index];
    if (s.action != kHeadAction && s.action != to_string(a.kind))
      r.fail(ca, quote_field(s.action) + " is not action " + std::to_string(s.index) + " of schedule.json (" +
                     to_string(a.kind) + ")");
    if (s.block != a.block)
      r.fail(cb, std::to_string(s.block) + " is not the block of action " + std::to_string(s.index) +
                     " of schedule.json (" + std::to_string(a.block) + ")");
    s.keep = r.str(ck);
    s.phase = static_cast<Phase>(r.enum_index(cp));
    s.start_ns = r.i64(cs);
    s.end_ns = r.i64(ce);
    s.step = static_cast<int>(r.i64(cstep));
    t.schedule_records.push_back(std::move(s));
  }
}

void read_ledger(const std::string& dir, Trace& t) {
  TableReader r = open_table(dir, kLedgerFile, t);
  const std::size_t cb = r.col("block"), ct = r.col("tensor"), cby = r.col("bytes"), cc = r.col("category"),
                    cp = r.col("created_phase"), ccr = r.col("created_ns"), cf = r.col("freed_ns"),
                    cd = r.col("decision"), ca = r.col("alloc_id"), cfi = r.col("free_id"), cw = r.col("why");
  const bool with_why = r.has(cw);  // version 5 on
  t.ledger.clear();
  while (r.next()) {
    LedgerEntry l;
    l.block = static_cast<int>(r.i64(cb));
    l.tensor = r.str(ct);
    l.bytes = r.u64(cby);
    l.category = static_cast<Category>(r.enum_index(cc));
    l.created = static_cast<Phase>(r.enum_index(cp));
    l.created_ns = r.i64(ccr);
    l.freed_ns = r.i64(cf);
    l.decision = r.str(cd);
    l.alloc_id = r.u64(ca);
    l.free_id = r.u64(cfi);
    if (with_why) l.why = r.str(cw);
    t.ledger.push_back(std::move(l));
  }
}

// One row per step that ran, in order: step = row, counted from the first step after warmup.
void read_loss(const std::string& dir, Trace& t) {
  TableReader r = open_table(dir, kLossFile, t);
  const std::size_t cs = r.col("step"), cc = r.col("counted"), cl = r.col("loss"), ct = r.col("time_ms"),
                    cp = r.col("peak_bytes"), cr = r.col("reserved_bytes"), cst = r.col("start_ns"),
                    ce = r.col("end_ns");
  t.step_stats.clear();
  while (r.next()) {
    StepStats s;
    s.step = static_cast<int>(r.i64(cs));
    if (static_cast<std::size_t>(s.step) != t.step_stats.size())
      r.fail(cs, std::to_string(s.step) + " is not step " + std::to_string(t.step_stats.size()) +
                     " (one row per step, in order)");
    s.counted = r.i64(cc) == 1;
    if (s.counted != (s.step >= t.warmup))
      r.fail(cc, std::string(s.counted ? "1" : "0") + ", but step " + std::to_string(s.step) +
                     (s.step >= t.warmup ? " is counted" : " is a warmup step") + " (warmup " +
                     std::to_string(t.warmup) + ")");
    s.loss = r.f64(cl);
    s.time_ms = r.f64(ct);
    s.peak_bytes = r.u64(cp);
    s.reserved_bytes = r.u64(cr);
    s.start_ns = r.i64(cst);
    s.end_ns = r.i64(ce);
    t.step_stats.push_back(s);
  }
}

// Each MoE layer's routing (version 6 on): per micro-batch, layer and expert in that order, every
// expert of a layer, the routed choices of a layer adding up to its micro-batch's tokens · top_k.
void read_routing(const std::string& dir, Trace& t) {
  t.routing.clear();
  if (!schema::table(kRoutingFile).in(t.format_version)) return;
  TableReader r = open_table(dir, kRoutingFile, t);
  const std::size_t cm = r.col("micro_batch"), cl = r.col("layer"), ce = r.col("expert"), cr = r.col("routed"),
                    ck = r.col("kept");
  const int E = t.model.moe.on() ? t.model.moe.experts : 0;
  const int micros = stage_blocks(t) > 0 ? std::max(1, provenance_int(t, "micro_batches", 1)) : 1;
  const std::uint64_t choices =
      static_cast<std::uint64_t>(t.model.tokens() / micros) * static_cast<std::uint64_t>(std::max(0, t.model.moe.top_k));
  const auto cap = static_cast<std::uint64_t>(t.model.moe.capacity(t.model.tokens() / micros));  // 0: dropless
  std::uint64_t sum = 0;
  while (r.next()) {
    RoutingRecord x;
    x.micro_batch = static_cast<std::int32_t>(r.i64(cm));
    x.layer = static_cast<std::int32_t>(r.i64(cl));
    x.expert = static_cast<std::int32_t>(r.i64(ce));
    x.routed = r.u64(cr);
    x.kept = r.u64(ck);
    if (E == 0) r.fail(cl, "a row, but the model has no experts");
    if (!t.model.moe_in(x.layer)) r.fail(cl, std::to_string(x.layer) + " is not a layer with experts");
    if (x.micro_batch >= micros)
      r.fail(cm, std::to_string(x.micro_batch) + ", the run has " + std::to_string(micros) + " micro-batches");
    if (x.expert >= E) r.fail(ce, std::to_string(x.expert) + ", the model has " + std::to_string(E) + " experts");
    if (x.routed > choices)
      r.fail(cr, std::to_string(x.routed) + ", more than the micro-batch's tokens · top_k " + std::to_string(choices));
    if (x.kept > x.routed)
      r.fail(ck, std::to_string(x.kept) + " kept of " + std::to_string(x.routed) + " routed");
    if (const std::uint64_t keeps = std::min(x.routed, cap); cap > 0 && x.kept != keeps)
      r.fail(ck, std::to_string(x.kept) + " kept of " + std::to_string(x.routed) + " routed, the capacity " +
                     std::to_string(cap) + " keeps " + std::to_string(keeps));
    if (t.model.moe.capacity_factor <= 0.0 && x.kept != x.routed)
      r.fail(ck, std::to_string(x.kept) + " kept of " + std::to_string(x.routed) + " routed, but routing is dropless");
    const bool first = t.routing.empty() || t.routing.back().micro_batch != x.micro_batch ||
                       t.routing.back().layer != x.layer;
    if (first && x.expert != 0) r.fail(ce, std::to_string(x.expert) + " where a layer's expert 0 should be");
    if (!first && x.expert != t.routing.back().expert + 1)
      r.fail(ce, std::to_string(x.expert) + " after expert " + std::to_string(t.routing.back().expert) +
                     " (every expert of a layer, in order)");
    if (first && !t.routing.empty() &&
        std::tie(x.micro_batch, x.layer) < std::tie(t.routing.back().micro_batch, t.routing.back().layer))
      r.fail(cl, "layer " + std::to_string(x.layer) + " of micro-batch " + std::to_string(x.micro_batch) +
                     " after a later one (in order of micro-batch, then layer)");
    if (first && !t.routing.empty() && t.routing.back().expert != E - 1)
      r.fail(ce, "layer " + std::to_string(t.routing.back().layer) + " ends at expert " +
                     std::to_string(t.routing.back().expert) + " of " + std::to_string(E));
    if (first) sum = 0;
    sum += x.routed;
    if (x.expert == E - 1 && sum != choices)
      r.fail(cr, "layer " + std::to_string(x.layer) + " routed " + std::to_string(sum) + " choices, its tokens · top_k are " +
                     std::to_string(choices));
    t.routing.push_back(x);
  }
  if (!t.routing.empty() && t.routing.back().expert != E - 1)
    throw Error(r.name() + ": layer " + std::to_string(t.routing.back().layer) + " ends at expert " +
                std::to_string(t.routing.back().expert) + " of " + std::to_string(E) + " (truncated?)");
  if (t.routing.empty()) return;  // a run that stopped before its last step (or a model without experts)
  // Every layer with experts of this rank's blocks, for every micro-batch.
  const int first = first_block(t), blocks = stage_blocks(t) > 0 ? stage_blocks(t) : t.model.layers;
  std::size_t layers = 0;
  for (int b = first; b < first + blocks; ++b) layers += t.model.moe_in(b);
  const std::size_t groups = t.routing.size() / static_cast<std::size_t>(E);
  if (groups != layers * static_cast<std::size_t>(micros))
    throw Error(r.name() + ": " + std::to_string(groups) + " layers of micro-batches, the run's " +
                std::to_string(micros) + " micro-batches of " + std::to_string(layers) +
                " layers with experts have " + std::to_string(layers * static_cast<std::size_t>(micros)) +
                " (truncated or edited?)");
}

}  // namespace

nlohmann::json read_summary(const std::string& dir, Trace& t) {
  const std::string file = join(dir, kSummaryFile);
  nlohmann::json j = read_json_file(file);
  if (!j.is_object()) throw Error(file + ": not a JSON object (" + json_snippet(j) + ")");
  // The format and its version first: the fields to expect depend on them.
  auto format = j.find("format");
  if (format == j.end() || *format != schema::kRunFormat)
    throw Error(file + ": not a RematLab run summary (format " + (format == j.end() ? "missing" : json_snippet(*format)) + ")");
  auto version = j.find("format_version");
  t.format_version = schema::check_format_version(version == j.end() ? nlohmann::json() : *version,
                                                  kTraceFormatVersion, file);
  schema::check_fields(j, schema::summary_fields(), t.format_version, file);
  try {
    trace_from_summary(j, file, t);
  } catch (const nlohmann::json::exception& e) {
    throw Error(file + ": " + e.what());
  }
  return j;
}

void read_schedule(const std::string& dir, const nlohmann::json& summary, Trace& t) {
  const std::string file = join(dir, kScheduleFile);
  try {
    t.schedule = load_schedule_file(file);
  } catch (const nlohmann::json::exception& e) {
    throw Error(file + ": " + e.what());
  } catch (const Error& e) {
    std::string w = e.what();
    if (w.rfind(file, 0) == 0) throw;
    throw Error(file + ": " + w);
  }
  // An imported trace has no schedule: nothing to run it against.
  if (t.imported()) {
    if (!t.schedule.actions.empty())
      throw Error(file + ": " + std::to_string(t.schedule.actions.size()) + " actions in a trace imported from " +
                  t.source + " (it has none)");
    return;
  }
  // A tensor-parallel rank planned its own block table (parallel_layout.h), with or without
  // sequence parallelism, which its summary does not name: the one whose figures it has.
  int tp = provenance_int(t, "tp_world_size", 1);
  if (tp < 1 || tp > t.model.heads) tp = 1;
  // A pipeline stage's rank planned one micro-batch of its stage's blocks.
  ModelConfig planned = t.model;
  if (const int blocks = stage_blocks(t); blocks > 0) {
    planned.layers = blocks;
    const int n = provenance_int(t, "micro_batches", 1);
    if (n >= 1 && planned.batch % n == 0) planned.batch /= n;
  }
  // Its blocks are the model's from the stage's first (windows, layer kinds and their tables
  // follow the model's block numbers).
  const int first = first_block(t);
  auto stats_of = [&](bool sp) {
    if (tp == 1) {
      BlockGraph g(planned);
      g.set_first_block(first);
      return validate_schedule(t.schedule, g);
    }
    ParallelLayout l;
    l.tp = tp;
    l.sp = sp;
    BlockGraph g = per_rank_graph(planned, l);
    g.set_first_block(first);
    return validate_schedule(t.schedule, g);
  };
  ScheduleStats st;
  try {
    st = stats_of(false);
    if (tp > 1 && st.flops_forward != t.plan.flops_forward) {
      const ScheduleStats with_sp = stats_of(true);
      if (with_sp.flops_forward == t.plan.flops_forward) st = with_sp;
    }
  } catch (const Error& e) {
    throw Error(file + ": " + e.what() + " (model '" + t.model.name + "' of " + std::to_string(t.model.layers) +
                " layers in summary.json" + (tp > 1 ? ", tensor-parallel rank of " + std::to_string(tp) : "") + ")");
  }
  const auto actions = summary["plan"]["actions"].get<std::uint64_t>();
  if (actions != t.schedule.actions.size())
    throw Error(file + ": " + std::to_string(t.schedule.actions.size()) + " actions, summary.json 'plan' says " +
                std::to_string(actions));
  // A run that ran has the plan of its schedule (one refused before its first step has none).
  // A step recorded from PyTorch (`source: "pytorch"`) counts the profiler's FLOPs, not the
  // block table's: its schedule is checked against the model, its figures are not.
  if (!t.complete || t.source == kRecordedSource) return;
  const std::pair<const char*, std::pair<std::uint64_t, std::uint64_t>> pairs[] = {
      {"block_forwards", {st.block_forwards, t.plan.block_forwards}},
      {"first_forwards", {st.first_forwards, t.plan.first_forwards}},
      {"forward_flops", {st.flops_forward, t.plan.flops_forward}},
      {"recompute_flops", {st.flops_recompute, t.plan.flops_recompute}},
      {"backward_flops", {st.flops_backward, t.plan.flops_backward}},
      {"max_checkpoints", {static_cast<std::uint64_t>(st.max_checkpoints), static_cast<std::uint64_t>(t.plan.max_checkpoints)}},
      {"offloads", {st.offloads, t.plan.offloads}},
      {"prefetches", {st.prefetches, t.plan.prefetches}}};
  for (const auto& [name, v] : pairs)
    if (v.first != v.second)
      throw Error(file + ": its plan has " + name + " " + std::to_string(v.first) + ", summary.json 'plan' says " +
                  std::to_string(v.second) + " (edited?)");
}

std::vector<std::function<void()>> table_jobs(const std::string& dir, const nlohmann::json& summary, Trace& t) {
  // The timeline is derived from the events: checked when present, right after the events
  // agree with the summary (export regenerates it).
  auto events_then_timeline = [&dir, &summary, &t] {
    read_events(dir, t);
    check_rows(dir, summary, kEventsFile, t.events.size());
    if (t.step_first_event > t.events.size() || t.step_end_event > t.events.size())
      throw Error(join(dir, kSummaryFile) + ": 'timeline' points past the " + std::to_string(t.events.size()) +
                  " rows of memory_events.csv (truncated?)");
    std::error_code ec;
    if (schema::table(kTimelineFile).required || fs::exists(fs::symlink_status(join(dir, kTimelineFile), ec)))
      check_timeline(dir, t);
  };
  return {events_then_timeline, [&dir, &t] { read_ops(dir, t); },
          [&dir, &t] {
            read_schedule_csv(dir, t);
            read_ledger(dir, t);
            read_loss(dir, t);
            read_routing(dir, t);
          }};
}

void cross_check(const std::string& dir, const nlohmann::json& j, const Trace& t) {
  const std::string file = join(dir, kSummaryFile);
  auto rows = csv_table_rows(t);
  const auto& names = csv_table_files();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (schema::table(names[i]).in(t.format_version)) check_rows(dir, j, names[i], rows[i]);
  // What can be derived without row counts, for every version.
  const std::string loss_file = join(dir, kLossFile);
  const std::int64_t steps_run = std::int64_t{t.warmup} + t.steps;
  const auto ran = static_cast<std::int64_t>(t.step_stats.size());
  if (t.complete ? ran != steps_run : ran > steps_run)
    throw Error(loss_file + ": " + std::to_string(ran) + " steps, summary.json says warmup " + std::to_string(t.warmup) +
                " + steps " + std::to_string(t.steps) + (t.complete ? " and the run is complete" : "") +
                " (truncated or edited?)");
  // The counted losses, step times and peaks in the summary come from loss.csv.
  auto losses = t.losses();
  auto times = t.step_times_ms();
  const auto& jl = j["loss"];
  const auto& jt = j["step_time_ms"];
  const auto& jp = j["step_peak_bytes"];
  if (jl.size() != losses.size() || jt.size() != times.size() || jp.size() != losses.size())
    throw Error(loss_file + ": its " + std::to_string(losses.size()) + " counted steps do not match summary.json's " +
                std::to_string(jl.size()));
  std::uint64_t peak = 0;
  std::size_t i = 0;
  for (const auto& s : t.step_stats) {
    if (!s.counted) continue;
    bool loss_ok = jl[i].is_null() ? !std::isfinite(s.loss) : jl[i].get<double>() == s.loss;
    bool time_ok = jt[i].get<double>() == s.time_ms;
    bool peak_ok = jp[i].get<std::uint64_t>() == s.peak_bytes;
    if (!loss_ok || !time_ok || !peak_ok)
      throw Error(loss_file + ": counted step " + std::to_string(i) + " (step " + std::to_string(s.step) + ") disagrees with summary.json's " +
                  (!loss_ok ? "'loss'" : !time_ok ? "'step_time_ms'" : "'step_peak_bytes'"));
    peak = std::max(peak, s.peak_bytes);
    ++i;
  }
  if (t.complete && !losses.empty() && peak != t.peak_bytes)
    throw Error(loss_file + ": the highest peak of the counted steps is " + std::to_string(peak) +
                ", summary.json 'peak_bytes' says " + std::to_string(t.peak_bytes));
  if (!t.complete) return;
  // A complete run: every op of the last counted step, every action of the schedule.
  std::uint64_t flops = 0;
  bool wrapped = false;
  for (const auto& o : t.ops) wrapped = __builtin_add_overflow(flops, o.flops, &flops) || wrapped;
  if (wrapped || flops != t.flops.total())
    throw Error(join(dir, kOpsFile) + ": its ops' flops add up to " + (wrapped ? "more than 2^64" : std::to_string(flops)) +
                ", summary.json 'flops.total' says " + std::to_string(t.flops.total()) + " (truncated or edited?)");
  if (stage_blocks(t) > 0) {
    // A pipeline stage runs the schedule once per micro-batch, the micro-batches' forwards and
    // backwards interleaved (1F1B): every action N times.
    const int n = provenance_int(t, "micro_batches", 1);
    std::vector<int> seen(t.schedule.actions.size(), 0);
    for (const auto& r : t.schedule_records) {
      if (r.action == kHeadAction) continue;
      if (r.index < 0 || static_cast<std::size_t>(r.index) >= seen.size())
        throw Error(join(dir, kScheduleCsv) + ": action " + std::to_string(r.index) + ", schedule.json has " +
                    std::to_string(seen.size()) + " (truncated or edited?)");
      ++seen[static_cast<std::size_t>(r.index)];
    }
    for (std::size_t a = 0; a < seen.size(); ++a)
      if (seen[a] != n)
        throw Error(join(dir, kScheduleCsv) + ": action " + std::to_string(a) + " ran " + std::to_string(seen[a]) +
                    " times, once per micro-batch is " + std::to_string(n) + " (truncated or edited?)");
    return;
  }
  std::size_t next = 0;
  for (const auto& r : t.schedule_records) {
    if (r.action == kHeadAction) continue;
    if (r.index != next)
      throw Error(join(dir, kScheduleCsv) + ": action " + std::to_string(r.index) + " where action " +
                  std::to_string(next) + " of schedule.json should be (truncated or edited?)");
    ++next;
  }
  if (next != t.schedule.actions.size())
    throw Error(join(dir, kScheduleCsv) + ": " + std::to_string(next) + " actions, schedule.json has " +
                std::to_string(t.schedule.actions.size()) + " (truncated?)");
}

}  // namespace remat::run_dir_read
