// ranks.json: one line per rank of a data-parallel run, from the ranks' own summaries.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/trace/schema.h"
#include "core/util/error.h"
#include "core/util/output_file.h"
#include "core/util/json_io.h"
#include "dist_run.h"

namespace fs = std::filesystem;

namespace remat::cli {

namespace {

std::string provenance(const nlohmann::json& s, const char* key) {
  auto p = s.find("provenance");
  if (p == s.end() || !p->is_object()) return {};
  auto v = p->find(key);
  return v != p->end() && v->is_string() ? v->get<std::string>() : std::string();
}

}  // namespace

nlohmann::json write_ranks_summary(const std::string& dir, int world, const DistOptions& d,
                                   std::int64_t global_batch, const std::string& failure) {
  nlohmann::json j;
  j["format"] = schema::kRanksFormat;
  j["format_version"] = schema::kRanksFormatVersion;
  j["world_size"] = world;
  const int T = std::max(1, d.tp), P = std::max(1, d.pp), D = std::max(1, world / (T * P));
  j["dp"] = D;
  j["tp"] = d.tp;
  j["pp"] = P;
  j["micro_batches"] = d.micro_batches_or_default();
  j["sp"] = d.sp;
  j["distribute_saved_activations"] = d.distribute_saved;
  j["zero"] = d.zero;
  j["global_batch"] = global_batch;
  bool complete = failure.empty();
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < world; ++r) {
    const std::string sub = "rank-" + std::to_string(r);
    // rank = (pp_rank·D + dp_rank)·T + tp_rank
    nlohmann::json row = {{"rank", r}, {"dir", sub}, {"tp_rank", r % T}, {"dp_rank", (r / T) % D},
                          {"pp_rank", r / (T * D)}};
    const fs::path file = fs::path(dir) / sub / "summary.json";
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      row["complete"] = false;
      row["status"] = "missing";
      complete = false;
      ranks.push_back(row);
      continue;
    }
    const nlohmann::json s = read_json_file(file.string());
    row["complete"] = s.value("complete", false);
    row["status"] = s.value("status", std::string("?"));
    for (const char* k : {"peak_bytes", "predicted_peak_bytes", "static_bytes", "step_time_ms_median"})
      if (s.contains(k)) row[k] = s[k];
    const std::string comm = provenance(s, "comm_bytes_per_step");
    row["comm_bytes_per_step"] = comm.empty() ? 0 : std::stoull(comm);
    if (r == 0)  // the global mean, the same on every rank
      for (const char* k : {"warmup_loss", "loss"})
        if (s.contains(k)) j[k] = s[k];
    if (!row["complete"].get<bool>()) complete = false;
    ranks.push_back(row);
  }
  j["complete"] = complete;
  j["status"] = complete ? "ok" : "error";
  if (!failure.empty()) j["error"] = failure;
  else if (!complete) j["error"] = "a rank did not complete (its rank-N/summary.json says why)";
  j["ranks"] = ranks;
  // Through the one writer (output_file.h): a reader never sees half of it.
  write_output_file((fs::path(dir) / schema::kRanksFile).string(), j.dump(2) + "\n");
  return j;
}

}  // namespace remat::cli
