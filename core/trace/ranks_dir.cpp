#include "core/trace/ranks_dir.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/trace/run_dir.h"
#include "core/trace/schema.h"
#include "core/util/error.h"
#include "core/util/json_io.h"

namespace fs = std::filesystem;

namespace remat {

namespace {

std::string path_of(const std::string& dir) { return (fs::path(dir) / schema::kRanksFile).string(); }

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw Error(where + ": missing field '" + key + "'");
  return *it;
}

int int_field(const nlohmann::json& j, const char* key, int lo, int hi, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi)
    throw Error(where + ": field '" + key + "' must be an integer " + std::to_string(lo) + ".." +
                std::to_string(hi) + ", got " + json_snippet(v));
  return v.get<int>();
}

bool bool_field(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_boolean()) throw Error(where + ": field '" + key + "' must be true or false, got " + json_snippet(v));
  return v.get<bool>();
}

std::uint64_t bytes_field(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return 0;  // a rank that left no summary has none
  if (!it->is_number_unsigned())
    throw Error(where + ": field '" + key + "' must be a non-negative integer, got " + json_snippet(*it));
  return it->get<std::uint64_t>();
}

}  // namespace

bool is_ranks_dir(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(path_of(dir), ec) && !fs::exists(fs::path(dir) / kSummaryFile, ec);
}

RanksDir read_ranks_json(const std::string& dir) {
  const std::string where = path_of(dir);
  const nlohmann::json j = read_json_file(where);
  if (!j.is_object() || !json_string_is(j, "format", schema::kRanksFormat))
    throw Error(where + ": not a RematLab ranks summary (its \"format\" is not \"" + schema::kRanksFormat + "\")");
  schema::check_format_version(field(j, "format_version", where), schema::kRanksFormatVersion, where);
  constexpr int kMaxRanks = 1 << 20;
  RanksDir r;
  r.world_size = int_field(j, "world_size", 1, kMaxRanks, where);
  r.tp = int_field(j, "tp", 1, kMaxRanks, where);
  r.dp = int_field(j, "dp", 1, kMaxRanks, where);
  r.zero = int_field(j, "zero", 0, 3, where);
  r.sp = bool_field(j, "sp", where);
  if (j.contains("distribute_saved_activations"))
    r.distribute_saved_activations = bool_field(j, "distribute_saved_activations", where);
  if (j.contains("pp")) r.pp = int_field(j, "pp", 1, kMaxRanks, where);
  if (j.contains("micro_batches")) r.micro_batches = int_field(j, "micro_batches", 1, kMaxRanks, where);
  r.complete = bool_field(j, "complete", where);
  r.status = json_string(j, "status", "", where);
  r.error = json_string(j, "error", "", where);
  if (static_cast<std::int64_t>(r.tp) * r.dp * r.pp != r.world_size)
    throw Error(where + ": world_size " + std::to_string(r.world_size) + " is not tp " + std::to_string(r.tp) +
                " × dp " + std::to_string(r.dp) + " × pp " + std::to_string(r.pp));
  const nlohmann::json& ranks = field(j, "ranks", where);
  if (!ranks.is_array() || ranks.size() != static_cast<std::size_t>(r.world_size))
    throw Error(where + ": field 'ranks' must be an array of " + std::to_string(r.world_size) + " ranks (world_size), got " +
                (ranks.is_array() ? std::to_string(ranks.size()) + " entries" : json_snippet(ranks)));
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::string w = where + " ranks[" + std::to_string(i) + "]";
    const nlohmann::json& e = ranks[i];
    if (!e.is_object()) throw Error(w + ": not a JSON object (" + json_snippet(e) + ")");
    RankRow row;
    row.rank = int_field(e, "rank", static_cast<int>(i), static_cast<int>(i), w);
    row.tp_rank = int_field(e, "tp_rank", 0, r.tp - 1, w);
    row.dp_rank = int_field(e, "dp_rank", 0, r.dp - 1, w);
    if (e.contains("pp_rank")) row.pp_rank = int_field(e, "pp_rank", 0, r.pp - 1, w);
    if ((row.pp_rank * r.dp + row.dp_rank) * r.tp + row.tp_rank != row.rank)
      throw Error(w + ": rank " + std::to_string(row.rank) + " is not (pp_rank " + std::to_string(row.pp_rank) +
                  " × dp " + std::to_string(r.dp) + " + dp_rank " + std::to_string(row.dp_rank) + ") × tp " +
                  std::to_string(r.tp) + " + tp_rank " + std::to_string(row.tp_rank));
    row.dir = "rank-" + std::to_string(row.rank);
    if (!json_string_is(e, "dir", row.dir))
      throw Error(w + ": field 'dir' must be \"" + row.dir + "\", got " + json_snippet(e.value("dir", nlohmann::json())));
    row.complete = bool_field(e, "complete", w);
    row.status = json_string(e, "status", "", w);
    row.peak_bytes = bytes_field(e, "peak_bytes", w);
    row.predicted_peak_bytes = bytes_field(e, "predicted_peak_bytes", w);
    row.comm_bytes_per_step = bytes_field(e, "comm_bytes_per_step", w);
    auto st = e.find("step_time_ms_median");
    if (st != e.end() && st->is_number()) row.step_time_ms_median = st->get<double>();
    r.ranks.push_back(std::move(row));
  }
  return r;
}

int peak_rank(const RanksDir& r) {
  int best = -1;
  for (const auto& row : r.ranks)
    if (row.complete && (best < 0 || row.peak_bytes > r.ranks[static_cast<std::size_t>(best)].peak_bytes))
      best = row.rank;
  return best;
}

Trace read_rank_run(const std::string& dir, const RanksDir& r, int rank) {
  if (rank < 0 || rank >= r.world_size)
    throw Error("'" + dir + "' is a run of " + std::to_string(r.world_size) + " ranks (0 to " +
                std::to_string(r.world_size - 1) + "); it has no rank " + std::to_string(rank));
  const std::string sub = (fs::path(dir) / r.ranks[static_cast<std::size_t>(rank)].dir).string();
  std::error_code ec;
  if (!fs::exists(fs::path(sub) / kSummaryFile, ec))
    throw Error("'" + dir + "': rank " + std::to_string(rank) + " of " + std::to_string(r.world_size) +
                " left no run directory (" + (r.error.empty() ? std::string("see ranks.json") : r.error) + ")");
  Trace t = read_run_dir(sub);
  t.provenance.emplace_back("rank", std::to_string(rank));
  t.provenance.emplace_back("tp", std::to_string(r.tp));
  t.provenance.emplace_back("dp", std::to_string(r.dp));
  t.provenance.emplace_back("sp", r.sp ? "1" : "0");
  t.provenance.emplace_back("distribute_saved_activations", r.distribute_saved_activations ? "1" : "0");
  t.provenance.emplace_back("zero", std::to_string(r.zero));
  return t;
}

int compared_rank(const RanksDir& r, std::optional<int> chosen, const std::string& dir) {
  if (chosen) {
    if (*chosen < 0 || *chosen >= r.world_size)
      throw Error("--rank " + std::to_string(*chosen) + ": '" + dir + "' is a run of " + std::to_string(r.world_size) +
                  " ranks (0 to " + std::to_string(r.world_size - 1) + ")");
    return *chosen;
  }
  const int p = peak_rank(r);
  return p < 0 ? 0 : p;
}

}  // namespace remat
