// rematlab-batch run: train a few steps under one policy and report what it cost.
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "core/engine/rank_prediction.h"
#include "core/graph/parallel_layout.h"
#include "core/io/weight_files.h"
#include "core/model/param_layout.h"
#include "core/trace/output_dir.h"
#include "core/trace/run_dir.h"
#include "core/trace/summary.h"
#include "core/util/error.h"
#include "core/util/process_time.h"
#include "dist_run.h"
#include "startup_parts.h"
#include "step_costs.h"
#include "training.h"

namespace remat::cli {

namespace {

struct RunOptions {
  ModelOptions model;
  PolicyOptions policy;
  TrainOptions train;
  DistOptions dist;
  std::string weights_in, weights_out, grads_out, shard_size, out;
  bool json = false, force = false;
};

double spread_ms(const Trace& t) {
  auto v = t.step_times_ms();
  if (v.empty()) return 0.0;
  auto [mn, mx] = std::minmax_element(v.begin(), v.end());
  return *mx - *mn;
}

void print_human(const Trace& t) {
  std::cout << "model " << t.model.name << " (" << to_string(t.model.family) << ", " << t.model.layers
            << " blocks, h=" << t.model.hidden << ", s=" << t.model.seq << ", b=" << t.model.batch
            << ", " << to_string(t.model.attention) << " attention, " << to_string(t.model.dtype)
            << ")\npolicy " << t.policy << (t.policy_params.empty() ? "" : ":" + t.policy_params)
            << " on " << t.device << "\n";
  auto l = t.losses();
  std::cout << "loss";
  for (double x : l) std::cout << " " << std::fixed << std::setprecision(4) << x;
  std::cout << "\npeak memory      " << human_bytes(t.peak_bytes) << " (" << t.peak_bytes << " bytes)"
            << "\npredicted peak   " << human_bytes(t.predicted_peak_bytes) << " ("
            << t.predicted_peak_bytes << " bytes)"
            << "\nstep time        " << std::setprecision(2) << t.median_step_ms() << " ms (median of "
            << l.size() << ", spread " << spread_ms(t) << " ms; " << t.warmup << " warmup step"
            << (t.warmup == 1 ? "" : "s") << " not counted)"
            << "\nFLOPs            forward " << t.flops.forward << ", recompute " << t.flops.recompute
            << ", backward " << t.flops.backward << "\n";
}

// The layout's per-rank block table for one stage and the policy's plan of it (a stage's: one
// micro-batch of its blocks; `m` the replica's model).
Schedule plan_rank(const RunOptions& o, const ModelConfig& m, int dp, int stage, const PolicyRegistry& reg,
                   const std::optional<StepCosts>& costs) {
  ParallelLayout layout;
  layout.tp = o.dist.tp;
  layout.sp = o.dist.sp;
  layout.distribute_saved_activations = o.dist.distribute_saved;
  ModelConfig planned = m;
  if (o.dist.pp > 1) {
    layout.pp = o.dist.pp;
    layout.micro_batches = o.dist.micro_batches_or_default();
    layout.first_stage_layers = o.dist.first_stage_layers;
    layout.last_stage_layers = o.dist.last_stage_layers;
    layout.dp = dp;
    planned.batch = m.batch / layout.micro_batches;
  }
  return o.dist.tp > 1 || o.dist.pp > 1 ? o.policy.plan(reg, per_rank_graph(planned, layout, stage), costs)
                                        : o.policy.plan(reg, m, costs);
}

// Every stage's plan before any rank starts (our launcher) or connects (a rank of another
// launcher, which plans every stage so that each rank refuses what any stage cannot take): a
// policy that cannot plan a stage (too few blocks for its segments, a bad parameter) is refused
// here, not after the ranks meet; distributed checkpoints also need a policy that recomputes
// blocks from their inputs. Returns each stage's plan for a world of `world` ranks.
std::vector<Schedule> plan_stages(const RunOptions& o, const ModelConfig& global, int world) {
  const ModelConfig m = replica_model(global, o.dist, world, o.train);  // the layout checked
  PolicyRegistry reg;
  load_plugins(reg, false);
  const std::optional<StepCosts> costs = load_step_costs(o.policy.costs_from, m);
  ParallelLayout p;
  p.pp = o.dist.pp;
  p.first_stage_layers = o.dist.first_stage_layers;
  p.last_stage_layers = o.dist.last_stage_layers;
  std::vector<Schedule> plans;
  for (int stage = 0; stage < o.dist.pp; ++stage) {
    try {
      plans.push_back(plan_rank(o, m, world / (o.dist.tp * o.dist.pp), stage, reg, costs));
    } catch (const Error& e) {
      if (o.dist.pp == 1) throw;
      const int blocks = p.stage_layers(m, stage);
      throw Error("pipeline stage " + std::to_string(stage) + " of " + std::to_string(o.dist.pp) + " (" +
                  std::to_string(blocks) + (blocks == 1 ? " block" : " blocks") + "): " + e.what());
    }
    if (o.dist.distribute_saved) check_distributed_schedule(plans.back(), p.stage_layers(m, stage));
  }
  return plans;
}

// The weight files' options: --save-shard-size parsed and needing a file to shard; the weights
// to load found and checked against the model from their headers, before anything runs.
WeightOptions weight_options(const RunOptions& o, const ModelConfig& m) {
  WeightOptions w{o.weights_in, o.weights_out, o.grads_out, 0};
  if (!o.shard_size.empty()) {
    w.shard_bytes = parse_bytes("save-shard-size", o.shard_size);
    if (w.shard_bytes == 0) throw ConfigError("save-shard-size", "must be at least 1 byte, got '" + o.shard_size + "'");
    if (o.weights_out.empty() && o.grads_out.empty())
      throw ConfigError("save-shard-size", "shards the files of --save-weights and --save-grads; neither is given");
  }
  if (!o.weights_in.empty()) check_weight_files(open_weight_files(o.weights_in), ParamLayout(m), m.family);
  // The run directory is not also a file or a directory of shards the run writes.
  auto place = [](const std::string& p) {
    std::filesystem::path n = std::filesystem::absolute(p).lexically_normal();
    return n.has_filename() ? n : n.parent_path();  // "dir/" is "dir"
  };
  if (!o.out.empty())
    for (const auto& [path, what] : {std::pair{&o.weights_out, "--save-weights"}, {&o.grads_out, "--save-grads"},
                                     {&o.train.dump_batch, "--dump-batch"}})
      if (!path->empty() && place(*path) == place(o.out))
        throw Error(std::string("--out and ") + what + " both name '" + o.out + "'");
  return w;
}

int run(RunOptions o) {
  StartupParts before_run;
  before_run.add("process", ms_since_process_start());
  ModelConfig m = o.model.resolve();
  const WeightOptions weights = weight_options(o, m);
  o.train.inputs = {{o.model.model, "--model"}, {o.policy.schedule_file, "--schedule"}};
  // Data parallelism: this process launches the ranks, or is one of them (dist_run.h).
  const std::optional<RankEnv> rank_env = rank_from_env();
  if (!rank_env && (o.dist.world() > 1 || o.dist.pp > 1 || o.dist.zero > 0 || o.dist.micro_batches > 1 ||
                    o.dist.first_stage_layers > 0 || o.dist.last_stage_layers > 0 || o.dist.distribute_saved)) {
    plan_stages(o, m, o.dist.world());
    return launch_ranks(o.dist, m, o.train, o.out, o.force, o.json);
  }
  // A rank of another launcher plans every stage before it connects (a world the layout does not
  // divide is join_ranks' to refuse); our launcher's ranks were planned by the launcher.
  std::vector<Schedule> stages;
  if (rank_env && !rank_env->ours && rank_env->size % (o.dist.tp * o.dist.pp) == 0) {
    stages = plan_stages(o, m, rank_env->size);
    before_run.mark("stages");
  }
  // A rank of another launcher writes OUT/rank-N: one that would be refused at the end is refused
  // before the rank connects (its peers then see it leave, not a run spent in vain).
  if (rank_env && !rank_env->ours && !o.out.empty()) check_output_dir(rank_out_dir(o.out, rank_env->rank), o.force);
  std::optional<RankRun> rank;
  if (rank_env) {
    rank = join_ranks(*rank_env, o.dist, m, o.train, o.out);
    before_run.mark("rendezvous");
  }
  PolicyRegistry reg;
  load_plugins(reg, !o.json);
  before_run.mark("plugins");
  const std::optional<StepCosts> costs = load_step_costs(o.policy.costs_from, m);
  // A tensor-parallel rank's or a pipeline stage's policy plans its own block table.
  Schedule s = !stages.empty() ? stages[static_cast<std::size_t>(rank->pp_rank)]
                                : plan_rank(o, m, rank ? rank->dist.dp : 1, rank ? rank->pp_rank : 0, reg, costs);
  // Refuse an output directory that would be refused at the end before spending the run on it.
  if (!o.out.empty()) check_output_dir(o.out, o.force);
  std::optional<std::uint64_t> budget;
  if (!o.policy.memory_budget.empty()) budget = parse_bytes("memory-budget", o.policy.memory_budget);
  before_run.mark("plan");
  Progress bar(!o.json && !rank);
  Trace t = train(m, s, o.train, budget, [&](double f, const std::string& w) { bar.update(f, w); },
                  &interrupt_flag(), weights);
  bar.done();
  before_run.put_first(t);
  add_costs_provenance(t, costs);
  if (rank) note_comm(t, *rank);
  // Checked above: what appeared there during the run is not replaced, the result is kept.
  if (!o.out.empty()) write_run_dir(t, o.out, o.force, true);
  // Our launcher's ranks speak through their run directories; a rank of another launcher
  // (torchrun, mpirun) prints its summary as one process does, so it keeps it without --out.
  if (rank && rank->env.ours) return finish_rank(*rank, t);
  if (o.json) std::cout << summary_json(t).dump(2) << "\n";
  else if (!t.step_stats.empty()) print_human(t);  // nothing to summarize when refused up front
  if (!o.out.empty() && !o.json) std::cout << "run directory    " << o.out << "\n";
  if (rank) {
    std::cout.flush();
    return finish_rank(*rank, t);
  }
  if (!t.complete) return fail("run " + t.status + ": " + t.error);
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* c = app.add_subcommand("run", "train warmup + counted steps under one policy and measure them");
  o->model.add(*c);
  o->policy.add(*c, true);
  o->train.add(*c);
  o->dist.add(*c);
  c->add_option("--load-weights", o->weights_in,
                "start from these weights (Hugging Face names): a safetensors file, a sharded checkpoint's "
                "model.safetensors.index.json, or a directory holding either");
  c->add_option("--save-weights", o->weights_out, "write the weights after the last step (safetensors)")
      ->check(non_empty_path());
  c->add_option("--save-grads", o->grads_out,
                "write the last step's gradients (safetensors, the weights' names and shapes, F32)")
      ->check(non_empty_path());
  c->add_option("--save-shard-size", o->shard_size,
                "write --save-weights and --save-grads as directories of shards of at most SIZE each (5GB, 512MiB; "
                "a larger tensor alone) with their model.safetensors.index.json, as Hugging Face lays them out");
  c->add_option("--out,-o", o->out, "write a run directory here (summary.json, CSV tables, trace.json)")
      ->check(non_empty_path());
  c->add_flag("--force", o->force, "replace an existing run directory");
  c->add_flag("--json", o->json, "print the summary as JSON");
  c->callback([o, &exit_code] {
    try {
      exit_code = run(*o);
    } catch (const std::exception& e) {
      exit_code = fail(e);
    }
  });
}

}  // namespace remat::cli
