// rematlab-batch plan: what a policy would do, predicted without running anything.
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "core/analysis/block_actions.h"
#include "commands.h"
#include "core/engine/simulator.h"
#include "core/util/error.h"
#include "plan_from_run.h"
#include "plan_parallel.h"
#include "plan_routing.h"
#include "plan_target.h"
#include "step_costs.h"

namespace remat::cli {

namespace {

struct PlanOptions {
  ModelOptions model;
  PolicyOptions policy;
  ParallelOptions parallel;
  TargetOptions target;
  RoutingOptions routing;
  bool model_given = false;  // --model: else --routing-from's run gives the model
  bool json = false;
  std::string from_run;  // a recorded PyTorch run (plan_from_run.h)
};

int plan(const PlanOptions& o) {
  if ((!o.routing.from.empty() || o.routing.imbalance) && (o.parallel.any() || o.parallel.strategies || o.parallel.paper_figure7))
    throw Error(std::string(o.routing.imbalance ? "--moe-imbalance" : "--routing-from") +
                " takes no --tp, --sp, --pp, --dp, --zero, --strategies or --paper-figure7 (a routing is planned for "
                "one rank holding every expert)");
  if ((o.parallel.paper_figure7 || o.parallel.strategies) && (o.target.cuda() || !o.target.gpu_memory.empty()))
    throw Error("--strategies and --paper-figure7 take no --device or --gpu-memory (their figures are the "
                "paper's activations, the same on every device)");
  if (o.parallel.paper_figure7) return plan_paper_figure7(o.json);
  std::optional<RecordedRouting> run;
  if (!o.routing.from.empty()) run = read_recorded_routing(o.routing.from);
  // The run's model (with any overrides) unless --model names another; its CPU lanes.
  ModelConfig m = run && !o.model_given ? o.model.apply(run->model) : o.model.resolve();
  TargetOptions target_options = o.target;
  if (run) target_options.cpu_threads = run->threads;
  std::optional<RoutingAssumption> routing = routing_assumption(o.routing, m, std::move(run));
  if (o.parallel.strategies) return plan_strategies(m, o.parallel.layout, o.json);
  const std::unique_ptr<Backend> target = target_options.backend();
  if (o.parallel.any()) return plan_parallel(m, o.parallel.layout, o.policy, o.target, *target, o.json);
  PolicyRegistry reg;
  load_plugins(reg, !o.json);
  const std::optional<StepCosts> costs = load_step_costs(o.policy.costs_from, m);
  const std::string cost_unit = costs ? costs->unit : kFlopsUnit;
  Schedule s = o.policy.plan(reg, m, costs);
  Prediction p = simulate(m, s, target.get());
  TargetFigures fig{p.peak_bytes, p.workspace_bytes, p.reserved_bytes, p.peak_bytes, p.rounded_peak_bytes,
                    moves_to_host(s), "", ""};
  if (o.json) {
    nlohmann::json j;
    j["model"] = model_to_json(m);
    j["policy"] = s.policy;
    j["policy_params"] = s.params;
    if (o.policy.schedule_file.empty()) j["cost_unit"] = cost_unit;
    j["predicted_peak_bytes"] = p.peak_bytes;
    j["static_bytes"] = p.static_bytes;
    j["workspace_bytes"] = p.workspace_bytes;
    j["activation_peak_bytes"] = p.activation_peak_bytes;
    j["host_peak_bytes"] = p.host_peak_bytes;
    j["block_forwards"] = p.block_forwards;
    j["recompute_flops"] = p.flops.recompute;
    j["flops"] = {{"forward", p.flops.forward}, {"recompute", p.flops.recompute},
                  {"backward", p.flops.backward}, {"other", p.flops.other}};
    j["saved_bytes_per_block"] = p.saved_bytes_per_block;
    j["max_checkpoints"] = p.plan.max_checkpoints;
    j["ignored_config_fields"] = m.ignored_fields;
    if (m.moe.on())
      j["experts"] = {{"routing", m.moe.capacity_factor > 0.0 ? "capacity" : "dropless"},
                      {"capacity_per_expert", m.moe.capacity(m.tokens())},
                      {"rows_per_layer", m.moe.rows(m.tokens())},
                      {"summary", describe_moe(m.moe, m.tokens())}};
    if (m.mla.on())
      j["latent_attention"] = {{"q_rank", m.mla.q_rank}, {"kv_rank", m.mla.kv_rank}, {"nope_dim", m.mla.nope_dim},
                               {"rope_dim", m.mla.rope_dim}, {"v_dim", m.mla.v_dim},
                               {"summary", describe_mla(m.mla, m.heads)}};
    if (routing) j["routing"] = routing_json(*routing, m, s, o.target.device, p.peak_bytes);
    target_json(o.target, fig, j);
    j["schedule"] = schedule_to_json(s);
    j["actions"] = j["schedule"]["actions"];
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "policy " << s.policy << (s.params.empty() ? "" : ":" + s.params) << " on model "
            << m.name << "\n"
            << "predicted peak        " << human_bytes(p.peak_bytes) << " (" << p.peak_bytes << " bytes)\n"
            << "  static (16 B/param) " << human_bytes(p.static_bytes) << "\n"
            << "  activations peak    " << human_bytes(p.activation_peak_bytes) << "\n"
            << "block forwards        " << p.block_forwards << " (" << m.layers << " blocks)\n"
            << "recompute FLOPs       " << p.flops.recompute << "\n"
            << "actions               " << s.actions.size() << "\n";
  if (p.host_peak_bytes > 0)
    std::cout << "host peak             " << human_bytes(p.host_peak_bytes) << " (offloaded, " << p.plan.offloads
              << " offloads)\n";
  if (o.policy.schedule_file.empty()) std::cout << "step costs            " << cost_unit << "\n";
  if (!m.layer_kinds.empty()) std::cout << "layer kinds           " << layer_kind_counts(m) << "\n";
  if (m.mla.on()) std::cout << "latent attention      " << describe_mla(m.mla, m.heads) << "\n";
  if (m.moe.on()) std::cout << "experts               " << describe_moe(m.moe, m.tokens()) << "\n";
  if (routing) print_routing(*routing, m, s, o.target.device, p.peak_bytes);
  if (!m.ignored_fields.empty()) std::cout << "ignored config fields " << ignored_list(m) << "\n";
  // What each block does, blocks that do the same together (the first 12 runs of them).
  const std::vector<BlockActions> runs = block_actions(s);
  for (std::size_t i = 0; i < runs.size() && i < 12; ++i) {
    const BlockActions& r = runs[i];
    const std::string which = r.first == r.last ? "block " + std::to_string(r.first)
                                                : "blocks " + std::to_string(r.first) + "-" + std::to_string(r.last);
    std::cout << (i == 0 ? "per block             " : "                      ") << which << ": " << r.actions << "\n";
  }
  if (runs.size() > 12) std::cout << "                      ... " << runs.size() - 12 << " more runs of blocks (--json has every action)\n";
  print_target(o.target, fig);
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* c = app.add_subcommand("plan", "plan a policy and predict its peak memory and FLOPs (nothing runs)");
  o->model.add(*c);
  o->policy.add(*c, true);
  o->parallel.add(*c);
  o->target.add(*c);
  o->routing.add(*c);
  c->add_flag("--json", o->json, "print the prediction and the schedule as JSON");
  c->add_option("--from-run", o->from_run,
                "a run recorded from PyTorch (rematlab.record): predict a checkpoint plan of its modules "
                "(--policy per-block|every:K|segments:K|sqrt|modules:GLOB)")
      ->check(non_empty_path());
  c->callback([o, c, &exit_code] {
    try {
      if (!o->from_run.empty()) {
        for (const char* opt : {"--model", "--schedule", "--memory-budget", "--costs-from", "--tp", "--sp", "--pp", "--dp",
                                "--zero", "--micro-batches", "--paper-figure7", "--strategies", "--device", "--gpu-memory",
                                "--routing-from", "--moe-imbalance"})
          if (c->count(opt)) throw Error(std::string("plan --from-run takes no ") + opt + " (the recorded run fixes the model and its layout)");
        exit_code = plan_from_run(o->from_run, o->policy.policy, o->json);
        return;
      }
      o->model_given = c->count("--model") > 0;
      exit_code = plan(*o);
    } catch (const std::exception& e) {
      exit_code = fail(e);
    }
  });
}

}  // namespace remat::cli
