#include "core/analysis/run_compare.h"

#include <nlohmann/json.hpp>

#include "core/analysis/run_layout.h"
#include "core/util/hash.h"

namespace remat {

bool same_model(const ModelConfig& a, const ModelConfig& b) { return model_to_json(a) == model_to_json(b); }

RunFigures run_figures(const Trace& t) {
  RunFigures f;
  f.policy = t.policy;
  f.model_key = model_to_json(global_model(t)).dump();
  f.layout = layout_label(run_layout(t));
  f.device = t.device;
  f.grad_checksum = hex64(t.grad_checksum);
  f.complete = t.complete;
  f.peak_bytes = t.peak_bytes;
  f.seed = t.seed;
  f.step_ms = t.median_step_ms();
  f.steps = t.steps;
  f.warmup = t.warmup;
  return f;
}

std::vector<RunRelation> relate(const std::vector<RunFigures>& runs) {
  std::vector<RunRelation> out(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunFigures& r = runs[i];
    for (std::size_t j = 0; j < runs.size(); ++j) {
      const RunFigures& b = runs[j];
      if (b.policy == "none" && b.complete && b.device == r.device && b.model_key == r.model_key) {
        out[i].baseline = static_cast<int>(j);
        break;
      }
    }
    if (out[i].baseline < 0 || !r.complete) continue;
    const RunFigures& b = runs[static_cast<std::size_t>(out[i].baseline)];
    auto cold = [](const RunFigures& x) { return x.steps <= 1 && x.warmup == 0; };
    out[i].cold = cold(r) || cold(b);
    if (b.step_ms > 0 && !out[i].cold) out[i].step_overhead_pct = 100.0 * (r.step_ms / b.step_ms - 1.0);
    if (b.peak_bytes > 0)
      out[i].peak_reduction_pct =
          100.0 * (1.0 - static_cast<double>(r.peak_bytes) / static_cast<double>(b.peak_bytes));
    // Bit-identical gradients only mean something for the same data and steps.
    if (b.seed == r.seed && b.steps == r.steps && b.warmup == r.warmup && b.layout == r.layout)
      out[i].grads_match_none = b.grad_checksum == r.grad_checksum;
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunFigures& r = runs[i];
    if (!r.complete) continue;
    bool dominated = false;
    for (std::size_t j = 0; j < runs.size() && !dominated; ++j) {
      const RunFigures& s = runs[j];
      if (i == j || !s.complete || s.model_key != r.model_key || s.device != r.device) continue;
      dominated = s.peak_bytes <= r.peak_bytes && s.step_ms <= r.step_ms &&
                  (s.peak_bytes < r.peak_bytes || s.step_ms < r.step_ms);
    }
    out[i].frontier = !dominated;
  }
  return out;
}

std::vector<RunRelation> relate_runs(const std::vector<const Trace*>& runs) {
  std::vector<RunFigures> f;
  f.reserve(runs.size());
  for (const Trace* t : runs) f.push_back(run_figures(*t));
  return relate(f);
}

}  // namespace remat
