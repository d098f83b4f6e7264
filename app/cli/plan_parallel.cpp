#include "plan_parallel.h"

#include <algorithm>

#include <cstdio>
#include <iostream>

#include "core/engine/rank_prediction.h"
#include "core/model/model_source.h"
#include "core/util/limits.h"
#include "step_costs.h"

namespace remat::cli {

namespace {

// Korthikanti et al. 2022, Table 3: the model presets and the t, p they were trained with.
struct PaperConfig {
  const char* preset;
  int tp, pp;
};
constexpr PaperConfig kPaperConfigs[] = {
    {"megatron-22b", 8, 1}, {"megatron-175b", 8, 8}, {"megatron-530b", 8, 35}, {"megatron-1t", 8, 64}};

nlohmann::json layout_json(const ModelConfig& m, const ParallelLayout& p, int micro_batches) {
  const std::int64_t global = static_cast<std::int64_t>(m.batch) * micro_batches * p.dp;
  return {{"tp", p.tp}, {"sp", p.sp}, {"pp", p.pp}, {"dp", p.dp}, {"zero", p.zero},
          {"distribute_saved_activations", p.distribute_saved_activations},
          {"micro_batch_size", m.batch}, {"micro_batches", micro_batches}, {"global_batch", global},
          {"first_stage_layers", p.first_stage_layers}, {"last_stage_layers", p.last_stage_layers}};
}

nlohmann::json static_json(const RankStatic& s) {
  return {{"param_elements", s.param_elements}, {"parameters", s.parameters},
          {"gradients", s.gradients}, {"master_weights", s.master_weights},
          {"optimizer_state", s.optimizer_state}, {"total", s.total()}};
}

std::string pad(const std::string& s, std::size_t w) { return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' '); }

void print_text(const ModelConfig& m, const RankPrediction& r, const std::string& policy) {
  const StagePrediction& top = r.stages[static_cast<std::size_t>(r.peak_stage)];
  const MicroBatchPrediction& mb = r.micro_batch[static_cast<std::size_t>(top.micro_batch)];
  const std::uint64_t waiting = static_cast<std::uint64_t>(top.in_flight - 1) * top.held_bytes;
  std::cout << "policy " << policy << " on model " << m.name << ", one rank of " << r.layout.to_string()
            << "; " << r.micro_batches << " micro-batch" << (r.micro_batches == 1 ? "" : "es")
            << " of " << m.batch << (r.layout.pp > 1 ? " (1F1B)" : "") << "\n"
            << "per-rank peak          " << human_bytes(r.peak_bytes) << " (" << r.peak_bytes
            << " bytes, stage " << r.peak_stage << ")\n"
            << "  static               " << human_bytes(top.statics.total()) << " ("
            << top.statics.param_elements << " parameters on this rank)\n"
            << "    parameters         " << human_bytes(top.statics.parameters) << "\n"
            << "    gradients          " << human_bytes(top.statics.gradients) << "\n"
            << "    master weights     " << human_bytes(top.statics.master_weights) << "\n"
            << "    optimizer state    " << human_bytes(top.statics.optimizer_state) << "\n"
            << "  activations          " << human_bytes(top.activation_bytes) << " (" << top.in_flight
            << " micro-batch" << (top.in_flight == 1 ? "" : "es") << " in flight)\n";
  if (top.in_flight > 1) {
    std::cout << "    held after forward " << human_bytes(waiting) << " (" << top.in_flight - 1 << " x "
              << human_bytes(top.held_bytes) << ": " << human_bytes(mb.held_bytes) << " in its " << top.blocks
              << " block" << (top.blocks == 1 ? "" : "s");
    if (top.held_bytes > mb.held_bytes) std::cout << ", " << human_bytes(top.held_bytes - mb.held_bytes) << " outside them";
    std::cout << ")\n";
  }
  std::cout << "    working set        " << human_bytes(top.working_set_bytes())
            << " (one micro-batch's forward, recomputes and backward on top of that)\n"
            << "  other                " << human_bytes(top.peak_bytes - top.statics.total() - top.activation_bytes)
            << " (one micro-batch's workspace, batch, activation gradients, logits, embedding and head)\n"
            << "stage  blocks  in flight  static        activations   peak\n";
  for (const StagePrediction& s : r.stages)
    std::cout << pad(std::to_string(s.stage), 7) << pad(std::to_string(s.blocks), 8)
              << pad(std::to_string(s.in_flight), 11) << pad(human_bytes(s.statics.total()), 14)
              << pad(human_bytes(s.activation_bytes), 14) << human_bytes(s.peak_bytes) << "\n";
}

}  // namespace

void ParallelOptions::add(CLI::App& c) {
  // Every count range-checked when the command line is read (exit 2): past these a layout has no
  // meaning on any machine, and the prediction's time and memory stay those of a few
  // micro-batches per stage whatever the counts (rank_prediction.h).
  c.add_option("--tp", layout.tp, "tensor-parallel ranks T (Megatron column/row-parallel linears)")
      ->check(CLI::Range(1, kMaxParallel));
  c.add_flag("--sp", layout.sp, "sequence parallelism over the T ranks (norms, dropouts, residuals on s/T)");
  c.add_option("--pp", layout.pp, "pipeline stages P (1F1B)")->check(CLI::Range(1, static_cast<int>(limits::kLayers)));
  c.add_option("--dp", layout.dp, "data-parallel replicas D")->check(CLI::Range(1, kMaxParallel));
  c.add_option("--zero", layout.zero, "ZeRO stage: 0, 1 (optimizer states / D), 2 (+ gradients), 3 (+ parameters)")
      ->check(CLI::Range(0, 3));
  c.add_flag("--distribute-saved-activations", layout.distribute_saved_activations,
             "split the checkpointed block inputs over the T ranks (full recomputation)");
  c.add_option("--micro-batches", layout.micro_batches, "micro-batches per replica and step (default P)")
      ->check(CLI::Range(1, kMaxParallel));
  c.add_option("--global-batch", layout.global_batch,
               "sequences per step over all replicas (must divide by D x the micro-batch size)")
      ->check(CLI::Range(std::int64_t{1}, kMaxGlobalBatch));
  c.add_option("--first-stage-layers", layout.first_stage_layers, "blocks of the first pipeline stage when it differs")
      ->check(CLI::Range(1, static_cast<int>(limits::kLayers)));
  c.add_option("--last-stage-layers", layout.last_stage_layers, "blocks of the last pipeline stage when it differs")
      ->check(CLI::Range(1, static_cast<int>(limits::kLayers)));
  c.add_flag("--strategies", strategies,
             "print the first stage's activations under the five strategies of Korthikanti et al. 2022");
  c.add_flag("--paper-figure7", paper_figure7,
             "--strategies for the paper's four models (Table 3) with their t and p (Figure 7)");
}

bool ParallelOptions::any() const {
  const ParallelLayout d;
  return layout.tp != d.tp || layout.sp || layout.pp != d.pp || layout.dp != d.dp ||
         layout.zero != d.zero || layout.distribute_saved_activations || layout.micro_batches != 0 ||
         layout.global_batch != 0 || layout.first_stage_layers != 0 || layout.last_stage_layers != 0;
}

int plan_parallel(const ModelConfig& m, const ParallelLayout& p, const PolicyOptions& policy,
                  const TargetOptions& target_options, const Backend& target, bool json) {
  validate_layout(p, m);
  const double global = static_cast<double>(m.batch) * p.micro_batches_of(m) * p.dp;
  if (global > static_cast<double>(kMaxGlobalBatch))
    throw ConfigError("global-batch", "a step of " + std::to_string(m.batch) + " x " +
                                          std::to_string(p.micro_batches_of(m)) + " x " + std::to_string(p.dp) +
                                          " sequences (micro-batch x micro-batches x replicas) is past the " +
                                          std::to_string(kMaxGlobalBatch) + " plan takes");
  PolicyRegistry reg;
  load_plugins(reg, !json);
  const std::optional<StepCosts> costs = load_step_costs(policy.costs_from, m);
  const RankPrediction r =
      predict_ranks(m, p, [&](const BlockGraph& g) { return policy.plan(reg, g, costs); }, &target);
  const Schedule& first = r.micro_batch.front().schedule;
  const std::string name = first.policy + (first.params.empty() ? "" : ":" + first.params);
  // The caching allocator of each stage's rank: the most any holds (every stage is its own GPU).
  TargetFigures fig{r.peak_bytes, r.micro_batch.front().sim.workspace_bytes, 0, 0, 0, false, "", ""};
  for (const MicroBatchPrediction& mb : r.micro_batch) fig.host_copies = fig.host_copies || moves_to_host(mb.schedule);
  for (const StagePrediction& s : r.stages) {
    if (s.reserved_bytes == 0) {
      fig.reserved = fig.rounded_peak = 0;
      fig.why_no_reserved = "stage " + std::to_string(s.stage) +
                            "'s peak is added up from one micro-batch's walk, and the allocator's blocks are not";
      break;
    }
    fig.rounded_peak = std::max(fig.rounded_peak, s.rounded_peak_bytes);
    if (s.reserved_bytes > fig.reserved) {
      fig.reserved = s.reserved_bytes;
      fig.reserved_rank_peak = s.peak_bytes;
      if (r.stages.size() > 1) fig.where = " on stage " + std::to_string(s.stage);
    }
  }
  if (!json) {
    print_text(m, r, name);
    print_target(target_options, fig);
    return 0;
  }
  nlohmann::json j;
  j["model"] = model_to_json(m);
  j["policy"] = first.policy;
  j["policy_params"] = first.params;
  j["layout"] = layout_json(m, p, r.micro_batches);
  j["ignored_config_fields"] = m.ignored_fields;
  j["predicted_peak_bytes"] = r.peak_bytes;
  j["peak_stage"] = r.peak_stage;
  target_json(target_options, fig, j);
  j["stages"] = nlohmann::json::array();
  for (const StagePrediction& s : r.stages)
    j["stages"].push_back({{"stage", s.stage}, {"blocks", s.blocks}, {"in_flight", s.in_flight},
                           {"micro_batch", s.micro_batch}, {"static", static_json(s.statics)},
                           {"activation_bytes", s.activation_bytes}, {"held_bytes", s.held_bytes},
                           {"working_set_bytes", s.working_set_bytes()}, {"peak_bytes", s.peak_bytes},
                           {"reserved_bytes", target_options.cuda() ? nlohmann::json(s.reserved_bytes) : nlohmann::json(nullptr)}});
  j["micro_batch"] = nlohmann::json::array();
  for (const MicroBatchPrediction& mb : r.micro_batch)
    j["micro_batch"].push_back(
        {{"blocks", mb.blocks}, {"held_bytes", mb.held_bytes},
         {"predicted_peak_bytes", mb.sim.peak_bytes}, {"simulated_static_bytes", mb.sim.static_bytes},
         {"workspace_bytes", mb.sim.workspace_bytes}, {"activation_peak_bytes", mb.sim.activation_peak_bytes},
         {"saved_bytes_per_block", mb.sim.saved_bytes_per_block},
         {"flops", {{"forward", mb.sim.flops.forward}, {"recompute", mb.sim.flops.recompute},
                    {"backward", mb.sim.flops.backward}, {"other", mb.sim.flops.other}}},
         {"schedule", schedule_to_json(mb.schedule)}});
  std::cout << j.dump(2) << "\n";
  return 0;
}

namespace {

nlohmann::json strategies_json(const ModelConfig& m, const ParallelLayout& p,
                               const std::vector<StrategyRow>& rows) {
  nlohmann::json j{{"model", m.name}, {"tp", p.tp}, {"pp", p.pp}, {"layers", m.layers},
                   {"first_stage_blocks", p.stage_layers(m, 0)},
                   {"in_flight", std::min(p.pp, p.micro_batches_of(m))}, {"strategies", nlohmann::json::array()}};
  for (const StrategyRow& r : rows)
    j["strategies"].push_back({{"name", r.name}, {"sp", r.sp}, {"layer_bytes", r.layer_bytes},
                               {"first_stage_bytes", r.first_stage_bytes}, {"percent", r.percent}});
  return j;
}

void print_strategies(const ModelConfig& m, const ParallelLayout& p, const std::vector<StrategyRow>& rows) {
  std::cout << m.name << ": " << m.layers << " blocks, h " << m.hidden << ", " << m.heads
            << " heads, s " << m.seq << ", b " << m.batch << "; t " << p.tp << ", p " << p.pp
            << " (first stage: " << p.stage_layers(m, 0) << " blocks x "
            << std::min(p.pp, p.micro_batches_of(m)) << " in flight)\n";
  for (const StrategyRow& r : rows) {
    char pct[16];
    std::snprintf(pct, sizeof pct, "%6.1f%%", r.percent);
    std::cout << "  " << pad(r.name, 34) << pct << "  " << pad(human_bytes(r.first_stage_bytes), 12)
              << "(" << r.layer_bytes << " bytes per block)\n";
  }
}

}  // namespace

int plan_strategies(const ModelConfig& m, const ParallelLayout& p, bool json) {
  const std::vector<StrategyRow> rows = paper_strategies(m, p);
  if (json) std::cout << strategies_json(m, p, rows).dump(2) << "\n";
  else print_strategies(m, p, rows);
  return 0;
}

int plan_paper_figure7(bool json) {
  nlohmann::json all = nlohmann::json::array();
  for (const PaperConfig& c : kPaperConfigs) {
    const ModelConfig m = resolve_model(c.preset);
    ParallelLayout p;
    p.tp = c.tp;
    p.pp = c.pp;
    const std::vector<StrategyRow> rows = paper_strategies(m, p);
    if (json) all.push_back(strategies_json(m, p, rows));
    else print_strategies(m, p, rows);
  }
  if (json) std::cout << all.dump(2) << "\n";
  return 0;
}

}  // namespace remat::cli
