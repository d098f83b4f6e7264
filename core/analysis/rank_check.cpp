#include "core/analysis/rank_check.h"

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/analysis/run_layout.h"
#include "core/util/error.h"

namespace remat {

namespace {

std::string num(double v) {
  std::ostringstream s;
  s.precision(6);
  s << v;
  return s.str();
}

}  // namespace

std::vector<RankIssue> check_ranks(const RanksDir& r, const std::vector<const Trace*>& ranks) {
  std::vector<RankIssue> out;
  const std::string world = std::to_string(r.world_size);
  const Trace* ref = nullptr;  // the first rank that is what ranks.json says it is
  for (std::size_t k = 0; k < r.ranks.size(); ++k) {
    const RankRow& row = r.ranks[k];
    const Trace* t = k < ranks.size() ? ranks[k] : nullptr;
    if (!t) {
      out.push_back({row.rank, true,
                     "rank " + std::to_string(row.rank) + " of " + world + " is missing: " + row.dir +
                         "/ holds no run (ranks.json says " + (row.status.empty() ? "nothing" : "'" + row.status + "'") +
                         ")"});
      continue;
    }
    std::vector<std::string> why;
    const RunLayout l = run_layout(*t);
    auto want = [&why](const char* what, long long got, long long expected) {
      if (got != expected)
        why.push_back(std::string(what) + " " + std::to_string(got) + " (this run's is " + std::to_string(expected) + ")");
    };
    want("tp", l.tp, r.tp);
    want("dp", l.dp, r.dp);
    want("pp", l.pp, r.pp);
    want("tp rank", provenance_int(*t, "tp_rank", 0), row.tp_rank);
    want("dp rank", provenance_int(*t, "dp_rank", 0), row.dp_rank);
    want("pp rank", provenance_int(*t, "pp_rank", 0), row.pp_rank);
    if (row.complete || row.peak_bytes) {
      if (t->peak_bytes != row.peak_bytes)
        why.push_back("peak " + std::to_string(t->peak_bytes) + " B where ranks.json recorded " +
                      std::to_string(row.peak_bytes) + " B");
      const double ms = t->median_step_ms();
      if (row.step_time_ms_median > 0 && std::abs(ms - row.step_time_ms_median) > 1e-6 * std::max(1.0, row.step_time_ms_median))
        why.push_back("median step " + num(ms) + " ms where ranks.json recorded " + num(row.step_time_ms_median) + " ms");
    }
    if (ref) {
      nlohmann::json a = model_to_json(t->model), b = model_to_json(ref->model);
      if (a != b) why.push_back("model " + t->model.name + " is not rank 0's (" + ref->model.name + " or its fields)");
      if (t->policy != ref->policy || t->policy_params != ref->policy_params)
        why.push_back("policy " + t->policy + " is not " + ref->policy);
      if (t->seed != ref->seed) why.push_back("seed " + std::to_string(t->seed) + " is not " + std::to_string(ref->seed));
      if (t->steps != ref->steps || t->warmup != ref->warmup)
        why.push_back(std::to_string(t->steps) + " steps after " + std::to_string(t->warmup) + " warmup, not " +
                      std::to_string(ref->steps) + " after " + std::to_string(ref->warmup));
      if (t->device != ref->device) why.push_back("device " + t->device + " is not " + ref->device);
    }
    if (why.empty()) {
      if (!ref) ref = t;
      continue;
    }
    std::string what = row.dir + "/ is not rank " + std::to_string(row.rank) + " of this run (from another job?): ";
    for (std::size_t i = 0; i < why.size(); ++i) what += (i ? "; " : "") + why[i];
    out.push_back({row.rank, false, what});
  }
  return out;
}

std::string rank_title(const RanksDir& r, int rank) {
  if (rank < 0 || static_cast<std::size_t>(rank) >= r.ranks.size()) return "rank " + std::to_string(rank);
  const RankRow& row = r.ranks[static_cast<std::size_t>(rank)];
  std::string s = "rank " + std::to_string(rank) + " (";
  if (r.pp > 1) s += "stage " + std::to_string(row.pp_rank) + ", ";
  return s + "tp rank " + std::to_string(row.tp_rank) + ", dp rank " + std::to_string(row.dp_rank) + ")";
}

std::string describe(const std::vector<RankIssue>& issues) {
  std::string s;
  for (const auto& i : issues) s += (s.empty() ? "" : "\n") + i.what;
  return s;
}

std::vector<RankIssue> chrome_ranks(const RanksDir& r, const std::vector<const Trace*>& ranks,
                                    std::vector<ChromeRank>& out) {
  std::vector<RankIssue> missing;
  for (const RankIssue& i : check_ranks(r, ranks)) {
    if (!i.missing) throw Error(i.what);
    missing.push_back(i);
  }
  out.clear();
  for (std::size_t k = 0; k < ranks.size(); ++k) out.push_back({ranks[k], rank_title(r, static_cast<int>(k))});
  return missing;
}

}  // namespace remat
