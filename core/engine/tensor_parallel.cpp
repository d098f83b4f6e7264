#include "core/engine/tensor_parallel.h"

#include <algorithm>

#include "core/engine/rank_prediction.h"
#include "core/engine/weight_init.h"
#include "core/model/param_layout.h"
#include "core/util/error.h"

namespace remat {

int tp_rank_of(const Communicator* c) { return c ? c->rank() : 0; }
int tp_size_of(const Communicator* c) { return c ? c->size() : 1; }

void check_tensor_parallel(const ModelConfig& m, const ParallelLayout& p) {
  validate_layout(p, m);
  if (p.tp <= 1) return;
  if (p.pp > 1)
    throw ConfigError("pp", "runs do not execute pipeline stages; `plan --pp " + std::to_string(p.pp) +
                                "` predicts them");
  const ModelConfig rm = tensor_rank_model(m, p.tp);
  const std::uint64_t holds = static_cast<std::uint64_t>(ParamLayout(rm).total());
  const std::uint64_t counted = rank_param_elements(m, p, 0);
  if (holds != counted)
    throw ConfigError("tp", "this model's blocks cannot be split over " + std::to_string(p.tp) +
                                " tensor-parallel ranks yet: a rank would hold " + std::to_string(holds) +
                                " parameters, the layout counts " + std::to_string(counted));
}

namespace {

// The fused parts of a column-parallel parameter, in rows.
std::vector<std::int64_t> parts_of(const ModelConfig& m, const ParamSpec& p) {
  if (p.local == "attn.qkv.w" || p.local == "attn.qkv.b") return {m.q_width(), m.kv_width(), m.kv_width()};
  if ((p.local == "mlp.fc.w" || p.local == "mlp.fc.b") && p.rows == 2 * m.ffn) return {m.ffn, m.ffn};
  return {p.rows};
}

}  // namespace

std::vector<WeightRun> rank_weight_runs(const ModelConfig& m, int tp, int t) {
  const ParamLayout G(m), R(tensor_rank_model(m, tp));
  if (G.params().size() != R.params().size())
    throw Error("weights: a tensor-parallel rank's layout differs from the model's");
  std::vector<WeightRun> runs;
  for (std::size_t i = 0; i < G.params().size(); ++i) {
    const ParamSpec& g = G.params()[i];
    const ParamSpec& r = R.params()[i];
    if (g.numel() == r.numel()) {
      runs.push_back({i, 0, g.numel(), r.offset});
    } else if (g.cols == r.cols && g.rows == r.rows * tp) {  // output rows split, part by part
      std::int64_t grow = 0, rrow = 0;
      for (std::int64_t part : parts_of(m, g)) {
        const std::int64_t share = part / tp;
        runs.push_back({i, (grow + t * share) * g.cols, (grow + (t + 1) * share) * g.cols,
                        r.offset + rrow * g.cols});
        grow += part;
        rrow += share;
      }
      if (grow != g.rows) throw Error("weights: '" + g.name + "' does not split into its parts");
    } else if (g.rows == r.rows && g.cols == r.cols * tp) {  // input columns split
      for (std::int64_t row = 0; row < g.rows; ++row)
        runs.push_back({i, row * g.cols + t * r.cols, row * g.cols + (t + 1) * r.cols,
                        r.offset + row * r.cols});
    } else {
      throw Error("weights: '" + g.name + "' is [" + std::to_string(g.rows) + ", " + std::to_string(g.cols) +
                  "], a rank's [" + std::to_string(r.rows) + ", " + std::to_string(r.cols) + "]");
    }
  }
  return runs;
}

std::vector<float> rank_weight_slices(const ModelConfig& m, int tp, int t, const std::vector<float>& global) {
  const ParamLayout G(m), R(tensor_rank_model(m, tp));
  if (static_cast<std::int64_t>(global.size()) != G.total())
    throw Error("weights: " + std::to_string(global.size()) + " values, the model has " + std::to_string(G.total()));
  std::vector<float> out(static_cast<std::size_t>(R.total()));
  for (const WeightRun& r : rank_weight_runs(m, tp, t)) {
    const float* src = global.data() + G.params()[r.param].offset;
    std::copy(src + r.begin, src + r.end, out.data() + r.dst);
  }
  return out;
}

std::vector<float> rank_weight_values(const ModelConfig& m, int tp, int t, std::uint64_t seed, int threads) {
  const ParamLayout G(m), R(tensor_rank_model(m, tp));
  std::vector<float> out(static_cast<std::size_t>(R.total()));
  init_weight_runs(G, m.layers, seed, rank_weight_runs(m, tp, t), out.data(), threads);
  return out;
}

DropoutKey tp_dropout_key(DropoutKey key, const ModelConfig& full, DropoutSite site, int tp, int t, bool sp) {
  if (tp <= 1) return key;
  const std::uint64_t S = static_cast<std::uint64_t>(full.seq);
  if (site == kSiteAttentionProbs) {
    const std::uint64_t per_head = S * S, heads = static_cast<std::uint64_t>(full.heads);
    key.run = heads / static_cast<std::uint64_t>(tp) * per_head;
    key.stride = heads * per_head;
    key.offset += static_cast<std::uint64_t>(t) * key.run;
  } else if (sp && (site == kSiteAttentionResidual || site == kSiteMlpResidual)) {
    const std::uint64_t n = static_cast<std::uint64_t>(full.tokens()) * static_cast<std::uint64_t>(full.hidden);
    key.offset += static_cast<std::uint64_t>(t) * (n / static_cast<std::uint64_t>(tp));
  }
  return key;
}

}  // namespace remat
