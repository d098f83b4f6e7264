// The schema table of the run directory (the rule for changing it: schema.h).
#include "core/trace/schema.h"

#include <nlohmann/json.hpp>

#include "core/memory/categories.h"
#include "core/schedule/schedule.h"
#include "core/trace/records.h"
#include "core/trace/trace.h"
#include "core/util/error.h"
#include "core/util/json_io.h"
#include "core/util/limits.h"

namespace remat::schema {

namespace {

template <class E>
std::vector<std::string_view> names_of(int count) {
  std::vector<std::string_view> v;
  for (int i = 0; i < count; ++i) v.emplace_back(to_string(static_cast<E>(i)));
  return v;
}

template <std::size_t N>
std::vector<std::string_view> names_of(const std::array<const char*, N>& a) {
  return std::vector<std::string_view>(a.begin(), a.end());
}

Column i64(std::string_view name, Bound b) { return {name, Type::Int, b}; }
Column u64(std::string_view name, Bound b = Bound::None) { return {name, Type::Uint, b}; }
Column fixed(std::string_view name, std::int64_t lo, std::int64_t hi) { return {name, Type::Int, Bound::Fixed, lo, hi}; }
Column f64(std::string_view name, Bound b) { return {name, Type::Float, b}; }
Column enm(std::string_view name, const std::vector<std::string_view>& values) {
  Column c{name, Type::Enum};
  c.values = &values;
  return c;
}
Column text(std::string_view name, bool non_empty) {
  Column c{name, Type::String};
  c.non_empty = non_empty;
  return c;
}

std::vector<Table> make_tables() {
  const auto& cat = category_values();
  const auto& ph = phase_values();
  Table events{kEventsFile, true,
               {i64("t_ns", Bound::Time), i64("step", Bound::EventStep), u64("id"),
                i64("delta_bytes", Bound::Delta), enm("category", cat), i64("block", Bound::Block),
                text("tensor", false), enm("phase", ph), enm("space", space_values()),
                u64("reserved_bytes", Bound::Bytes), u64("op_seq")},
               {}};
  Table timeline{kTimelineFile, false,
                 {i64("t_ns", Bound::Time), fixed("event", -1, std::numeric_limits<std::int64_t>::max()),
                  i64("device_bytes", Bound::Bytes), i64("host_bytes", Bound::Bytes)},
                 {}};
  for (auto c : cat) timeline.columns.push_back(i64(c, Bound::Bytes));
  timeline.columns.back().since = 2;  // unknown (imported traces)
  // stream: `comm` is a value from version 3 on, so the column is two entries, one per value set.
  Column stream_v1 = enm("stream", stream_values_v1());
  stream_v1.until = 3;
  Column stream = enm("stream", stream_values());
  stream.since = 3;
  Column ranks = text("ranks", false);  // a collective's group, global ranks "0 1"
  ranks.since = 3;
  Table ops{kOpsFile, true,
            {i64("start_ns", Bound::Time), i64("end_ns", Bound::Time), stream_v1, stream,
             text("name", true), text("op", false), i64("block", Bound::Block), enm("phase", ph),
             i64("step", Bound::LastStep), u64("flops"), u64("bytes"), u64("op_id"), ranks},
            {{"start_ns", "end_ns"}}};
  Table sched{kScheduleCsv, true,
              {u64("index"), enm("action", action_values()), i64("block", Bound::BlockOnly),
               text("keep", false), enm("phase", ph), i64("start_ns", Bound::Time),
               i64("end_ns", Bound::Time), i64("step", Bound::LastStep)},
              {{"start_ns", "end_ns"}}};
  Column why = text("why", false);  // version 5 on
  why.since = 5;
  Table ledger{kLedgerFile, true,
               {i64("block", Bound::BlockOnly), text("tensor", true), u64("bytes", Bound::Bytes),
                enm("category", cat), enm("created_phase", ph), i64("created_ns", Bound::Time),
                i64("freed_ns", Bound::Time), enm("decision", decision_values()), u64("alloc_id"),
                u64("free_id"), why},
               {}};
  Table loss{kLossFile, true,
             {i64("step", Bound::Step), fixed("counted", 0, 1), f64("loss", Bound::None),
              f64("time_ms", Bound::Duration), u64("peak_bytes", Bound::Bytes),
              u64("reserved_bytes", Bound::Bytes), i64("start_ns", Bound::Time), i64("end_ns", Bound::Time)},
             {{"start_ns", "end_ns"}}};
  // Each MoE layer's routing per micro-batch and expert (version 6 on; no rows without experts).
  Table routing{kRoutingFile, true,
                {fixed("micro_batch", 0, std::numeric_limits<std::int32_t>::max()), i64("layer", Bound::BlockOnly),
                 fixed("expert", 0, std::numeric_limits<std::int32_t>::max()), u64("routed"), u64("kept")},
                {}};
  routing.since = 6;
  return {events, timeline, ops, sched, ledger, loss, routing};
}

using J = JsonType;
constexpr std::int64_t kI32Max = std::numeric_limits<std::int32_t>::max();

const char* type_name(JsonType t) {
  switch (t) {
    case J::String: return "a string";
    case J::Bool: return "true or false";
    case J::Int: return "an integer";
    case J::Uint: return "a non-negative integer";
    case J::Number: return "a number";
    case J::NumberOrNull: return "a number or null";
    case J::Object: return "an object";
    case J::Array: return "an array";
    case J::UintArray: return "an array of non-negative integers";
    case J::NumberArray: return "an array of numbers";
    case J::NumberOrNullArray: return "an array of numbers (null for nan)";
    case J::StringArray: return "an array of strings";
  }
  return "?";
}

bool is_type(const nlohmann::json& v, JsonType t) {
  auto all = [&v](auto pred) {
    if (!v.is_array()) return false;
    for (const auto& x : v)
      if (!pred(x)) return false;
    return true;
  };
  switch (t) {
    case J::String: return v.is_string();
    case J::Bool: return v.is_boolean();
    case J::Int:
      return v.is_number_integer() &&
             !(v.is_number_unsigned() &&
               v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
    case J::Uint: return v.is_number_unsigned();
    case J::Number: return v.is_number();
    case J::NumberOrNull: return v.is_number() || v.is_null();
    case J::Object: return v.is_object();
    case J::Array: return v.is_array();
    case J::UintArray: return all([](const nlohmann::json& x) { return x.is_number_unsigned(); });
    case J::NumberArray: return all([](const nlohmann::json& x) { return x.is_number(); });
    case J::NumberOrNullArray: return all([](const nlohmann::json& x) { return x.is_number() || x.is_null(); });
    case J::StringArray: return all([](const nlohmann::json& x) { return x.is_string(); });
  }
  return false;
}

}  // namespace

int check_format_version(const nlohmann::json& v, int newest, const std::string& where) {
  const std::string known = "it reads versions 1 to " + std::to_string(newest);
  if (!v.is_number_integer())
    throw Error(where + ": field 'format_version' must be an integer, got " + json_snippet(v) + " (" + known + ")");
  if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(newest) : v.get<std::int64_t>() > newest)
    throw Error(where + ": format version " + v.dump() + " is newer than this RematLab reads (" +
                std::to_string(newest) + "); upgrade RematLab");
  if (v.get<std::int64_t>() < 1)
    throw Error(where + ": format version " + v.dump() + " is not one RematLab wrote (" + known + ")");
  return v.get<int>();
}

std::vector<std::string> Table::header(int version) const {
  std::vector<std::string> h;
  for (const auto& c : columns)
    if (c.in(version)) h.emplace_back(c.name);
  return h;
}

const std::vector<Table>& tables() {
  static const std::vector<Table> t = make_tables();
  return t;
}

const Table& table(std::string_view file) {
  for (const auto& t : tables())
    if (t.file == file) return t;
  throw Error("no schema for '" + std::string(file) + "'");
}

const std::vector<std::string_view>& category_values() {
  static const auto v = names_of<Category>(kNumCategories);
  return v;
}
const std::vector<std::string_view>& phase_values() {
  static const auto v = names_of<Phase>(kNumPhases);
  return v;
}
const std::vector<std::string_view>& space_values() {
  static const auto v = names_of<Space>(static_cast<int>(Space::Host) + 1);
  return v;
}
const std::vector<std::string_view>& stream_values() {
  static const auto v = names_of<Stream>(kNumStreams);
  return v;
}
const std::vector<std::string_view>& stream_values_v1() {
  static const auto v = names_of<Stream>(static_cast<int>(Stream::Host) + 1);
  return v;
}
const std::vector<std::string_view>& action_values() {
  static const auto v = [] {
    auto a = names_of<ActionKind>(static_cast<int>(ActionKind::Drop) + 1);
    a.emplace_back(kHeadAction);
    return a;
  }();
  return v;
}
const std::vector<std::string_view>& decision_values() {
  static const auto v = names_of(kLedgerDecisions);
  return v;
}
const std::vector<std::string_view>& status_values() {
  static const auto v = names_of(kRunStatuses);
  return v;
}

// ------------------------------------------------------------------ JSON files

const std::vector<Field>& summary_fields() {
  static const std::vector<Field> f = {
      {"format", J::String},
      {"format_version", J::Int},
      {"source", J::String, true, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(), 2},
      {"complete", J::Bool},
      {"status", J::String},
      {"error", J::String, false},
      {"model", J::Object},
      {"ignored_config_fields", J::StringArray, true, std::numeric_limits<std::int64_t>::min(),
       std::numeric_limits<std::int64_t>::max(), 4},
      {"policy", J::String},
      {"policy_params", J::String},
      {"memory_budget_bytes", J::Uint},
      {"device", J::String},
      {"seed", J::Uint},
      {"warmup", J::Int, true, 0, kI32Max},
      {"steps", J::Int, true, 0, kI32Max},
      {"loss", J::NumberOrNullArray},
      {"warmup_loss", J::NumberOrNullArray},
      {"step_time_ms", J::NumberArray},
      {"step_time_ms_median", J::Number},
      {"step_time_ms_spread", J::Number},
      {"step_peak_bytes", J::UintArray},
      {"step_peak_bytes_median", J::Number, false},
      {"step_peak_bytes_spread", J::Uint, false},
      {"peak_bytes", J::Uint},
      {"predicted_peak_bytes", J::Uint},
      {"peak_reserved_bytes", J::Uint},
      {"static_bytes", J::Uint},
      {"activation_peak_bytes", J::Uint},
      {"saved_bytes_per_block", J::UintArray},
      {"host_bytes_per_block", J::UintArray},
      {"flops", J::Object},
      {"flops.forward", J::Uint},
      {"flops.recompute", J::Uint},
      {"flops.backward", J::Uint},
      {"flops.other", J::Uint},
      {"flops.total", J::Uint},
      {"block_forwards", J::Uint},
      {"plan", J::Object},
      {"plan.actions", J::Uint},
      {"plan.block_forwards", J::Uint},
      {"plan.first_forwards", J::Uint},
      {"plan.forward_flops", J::Uint},
      {"plan.recompute_flops", J::Uint},
      {"plan.backward_flops", J::Uint},
      {"plan.max_checkpoints", J::Int, true, 0, kI32Max},
      {"plan.offloads", J::Uint},
      {"plan.prefetches", J::Uint},
      {"grad_checksum", J::String},
      {"profiler_overhead_ns", J::Int},
      {"startup_ms", J::Number, false},
      {"startup_breakdown_ms", J::Object, false},
      {"peak_tensors", J::Array},
      {"provenance", J::Object},
      {"timeline", J::Object},
      {"timeline.first_event", J::Uint},
      {"timeline.end_event", J::Uint},
      {"timeline.start_ns", J::Int, true, 0, limits::kClockNs},
      {"timeline.end_ns", J::Int, true, 0, limits::kClockNs},
      {"files", J::Object},
  };
  return f;
}

const std::vector<Field>& peak_tensor_fields() {
  static const std::vector<Field> f = {{"tensor", J::String}, {"bytes", J::Uint}};
  return f;
}

const std::vector<Field>& sweep_fields() {
  static const std::vector<Field> f = {
      {"format", J::String},   {"format_version", J::Int}, {"model", J::Object},
      {"device", J::String},   {"seed", J::Uint},          {"steps", J::Int, true, 0, kI32Max},
      {"warmup", J::Int, true, 0, kI32Max},                {"complete", J::Bool},
      {"runs", J::Array},      {"provenance", J::Object},
  };
  return f;
}

const std::vector<Field>& sweep_run_fields() {
  static const std::vector<Field> f = {{"run", J::String},    {"dir", J::String},
                                       {"policy", J::String}, {"memory_budget_bytes", J::Uint},
                                       {"status", J::String}};
  return f;
}

void check_fields(const nlohmann::json& j, const std::vector<Field>& fields, int version,
                  const std::string& where) {
  if (!j.is_object()) throw Error(where + ": not a JSON object (" + json_snippet(j) + ")");
  for (const auto& f : fields) {
    if (!f.in(version)) continue;
    // Walk "a.b": the parent is checked to be an object by its own entry first.
    const nlohmann::json* v = &j;
    std::string_view rest = f.path;
    bool present = true;
    while (present) {
      auto dot = rest.find('.');
      std::string key(rest.substr(0, dot));
      auto it = v->find(key);
      if (!v->is_object() || it == v->end()) {
        present = false;
        break;
      }
      v = &*it;
      if (dot == std::string_view::npos) break;
      rest.remove_prefix(dot + 1);
    }
    const std::string name(f.path);
    if (!present) {
      if (f.required)
        throw Error(where + ": missing field '" + name + "' (format version " + std::to_string(version) + " has it)");
      continue;
    }
    if (!is_type(*v, f.type))
      throw Error(where + ": field '" + name + "' must be " + type_name(f.type) + ", got " + json_snippet(*v));
    if (f.type == J::Int) {
      auto x = v->get<std::int64_t>();
      if (x < f.min || x > f.max)
        throw Error(where + ": field '" + name + "' is " + std::to_string(x) + ", outside " +
                    std::to_string(f.min) + ".." + std::to_string(f.max));
    }
  }
}

}  // namespace remat::schema
