#include "core/engine/pipeline_stage.h"

#include <string>

#include "core/engine/tensor_parallel.h"
#include "core/util/error.h"

namespace remat {

StageCut stage_cut(const ModelConfig& m, const ParallelLayout& p, int stage) {
  StageCut c;
  c.stage = stage;
  c.stages = p.pp;
  c.first_block = p.stage_first_block(m, stage);
  c.blocks = p.stage_layers(m, stage);
  c.parts.embedding = stage == 0;
  c.parts.head = stage == p.pp - 1;
  c.parts.first_block = c.first_block;
  return c;
}

ModelConfig stage_rank_model(const ModelConfig& m, const ParallelLayout& p, int stage) {
  return tensor_rank_model(stage_model(m, p, stage), p.tp);
}

std::vector<WeightRun> stage_weight_runs(const ModelConfig& m, const ParallelLayout& p, int stage, int t) {
  const StageCut c = stage_cut(m, p, stage);
  const ParamLayout G(m), R(tensor_rank_model(m, p.tp)), S(stage_rank_model(m, p, stage), c.parts);
  // Each of the rank's parameters' place in the stage's layout (-1: another stage's).
  std::vector<std::int64_t> at(R.params().size(), -1);
  std::size_t k = 0;
  for (std::size_t i = 0; i < R.params().size(); ++i) {
    const ParamSpec& r = R.params()[i];
    bool held = false;
    if (r.block >= 0) held = r.block >= c.first_block && r.block < c.first_block + c.blocks;
    else if (r.offset == R.wte) held = c.parts.embedding || (c.parts.head && R.lm_head < 0);
    else if (r.offset == R.wpe) held = c.parts.embedding;
    else held = c.parts.head;  // the final norm and the output layer
    if (!held) continue;
    if (k >= S.params().size() || S.params()[k].numel() != r.numel())
      throw Error("weights: stage " + std::to_string(stage) + "'s layout does not hold '" + r.name + "'");
    at[i] = S.params()[k++].offset;
  }
  if (k != S.params().size())
    throw Error("weights: stage " + std::to_string(stage) + "'s layout has parameters the model lacks");
  const std::vector<WeightRun> rank = p.tp > 1 ? rank_weight_runs(m, p.tp, t) : layout_weight_runs(G);
  std::vector<WeightRun> runs;
  for (const WeightRun& w : rank) {
    // rank_weight_runs keeps ParamLayout(m)'s parameter order, so w.param indexes R too.
    const std::int64_t dst = at[w.param];
    if (dst < 0) continue;
    runs.push_back({w.param, w.begin, w.end, dst + (w.dst - R.params()[w.param].offset)});
  }
  return runs;
}

std::vector<float> stage_weight_values(const ModelConfig& m, const ParallelLayout& p, int stage, int t,
                                       std::uint64_t seed, int threads) {
  const ParamLayout G(m), S(stage_rank_model(m, p, stage), stage_cut(m, p, stage).parts);
  std::vector<float> out(static_cast<std::size_t>(S.total()));
  init_weight_runs(G, m.layers, seed, stage_weight_runs(m, p, stage, t), out.data(), threads);
  return out;
}

void check_pipeline(const ModelConfig& m, const ParallelLayout& p) {
  validate_layout(p, m);
  if (p.pp <= 1) return;
}

}  // namespace remat
