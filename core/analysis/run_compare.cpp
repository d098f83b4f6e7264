#include "core/analysis/run_compare.h"

#include <nlohmann/json.hpp>

namespace remat {

bool same_model(const ModelConfig& a, const ModelConfig& b) { return model_to_json(a) == model_to_json(b); }

std::vector<RunRelation> relate_runs(const std::vector<const Trace*>& runs) {
  std::vector<RunRelation> out(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Trace& r = *runs[i];
    for (std::size_t j = 0; j < runs.size(); ++j) {
      const Trace& b = *runs[j];
      if (b.policy == "none" && b.complete && b.device == r.device && same_model(b.model, r.model)) {
        out[i].baseline = static_cast<int>(j);
        break;
      }
    }
    if (out[i].baseline < 0 || !r.complete) continue;
    const Trace& b = *runs[static_cast<std::size_t>(out[i].baseline)];
    const double bt = b.median_step_ms(), rt = r.median_step_ms();
    if (bt > 0) out[i].step_overhead_pct = 100.0 * (rt / bt - 1.0);
    if (b.peak_bytes > 0)
      out[i].peak_reduction_pct =
          100.0 * (1.0 - static_cast<double>(r.peak_bytes) / static_cast<double>(b.peak_bytes));
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Trace& r = *runs[i];
    if (!r.complete) continue;
    bool dominated = false;
    for (std::size_t j = 0; j < runs.size() && !dominated; ++j) {
      const Trace& s = *runs[j];
      if (i == j || !s.complete) continue;
      const double st = s.median_step_ms(), rt = r.median_step_ms();
      dominated = s.peak_bytes <= r.peak_bytes && st <= rt && (s.peak_bytes < r.peak_bytes || st < rt);
    }
    out[i].frontier = !dominated;
  }
  return out;
}

}  // namespace remat
