// rematlab-batch run: train a few steps under one policy and report what it cost.
#include <atomic>
#include <csignal>
#include <iomanip>
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "commands.h"
#include "core/backend/backend_factory.h"
#include "core/engine/run.h"
#include "core/trace/summary.h"
#include "core/util/error.h"

namespace remat::cli {

namespace {

struct RunOptions {
  ModelOptions model;
  PolicyOptions policy;
  std::string device = "cpu";
  int steps = 3, warmup = 1, threads = 2;
  std::uint64_t seed = 0;
  std::string memory_limit, weights_in, weights_out, corpus;
  double lr = 1e-3;
  bool json = false, poison = false, no_profile = false;
};

void print_human(const Trace& t) {
  std::cout << "model " << t.model.name << " (" << to_string(t.model.arch) << ", " << t.model.layers
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
            << l.size() << ")"
            << "\nFLOPs            forward " << t.flops.forward << ", recompute " << t.flops.recompute
            << ", backward " << t.flops.backward << "\n";
}

int run(const RunOptions& o) {
  ModelConfig m = o.model.resolve();
  PolicyRegistry reg;
  load_plugins(reg, !o.json);
  RunSpec spec;
  spec.model = m;
  spec.schedule = o.policy.plan(reg, m);
  spec.steps = o.steps;
  spec.warmup = o.warmup;
  spec.seed = o.seed;
  spec.poison = o.poison;
  spec.adam.lr = static_cast<float>(o.lr);
  spec.corpus_path = o.corpus;
  spec.weights_in = o.weights_in;
  spec.weights_out = o.weights_out;
  if (!o.memory_limit.empty()) spec.memory_limit = parse_bytes("memory-limit", o.memory_limit);
  SteadyClock clock;
  Device dev = make_device(o.device, o.threads, clock, !o.no_profile);
  static std::atomic<bool> cancel{false};
  std::signal(SIGINT, [](int) { cancel.store(true); });
  Progress bar(!o.json);
  RunCallbacks cb;
  cb.cancel = &cancel;
  cb.progress = [&](double f, const std::string& w) { bar.update(f, w); };
  Trace t = run_training(spec, *dev.backend, dev.profiler.get(), clock, cb);
  bar.done();
  if (o.json) std::cout << summary_json(t).dump(2) << "\n";
  else print_human(t);
  if (!t.complete) return fail("run " + t.status + ": " + t.error);
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* c = app.add_subcommand("run", "train warmup + counted steps under one policy and measure them");
  o->model.add(*c);
  o->policy.add(*c, true);
  c->add_option("--device", o->device, "cpu | cuda")->capture_default_str();
  c->add_option("--steps", o->steps, "counted steps")->capture_default_str()->check(CLI::Range(1, 1000000));
  c->add_option("--warmup", o->warmup, "steps run first and not counted")->capture_default_str()->check(CLI::Range(0, 1000000));
  c->add_option("--seed", o->seed, "seed for weights, batches and dropout")->capture_default_str();
  c->add_option("--threads", o->threads, "CPU threads (OpenBLAS and our ops)")->capture_default_str()->check(CLI::Range(1, 256));
  c->add_option("--memory-limit", o->memory_limit, "refuse runs predicted to need more device memory (default: what is available)");
  c->add_option("--lr", o->lr, "AdamW learning rate")->capture_default_str();
  c->add_option("--load-weights", o->weights_in, "start from a safetensors file (Hugging Face names)");
  c->add_option("--save-weights", o->weights_out, "write the weights after the last step (safetensors)");
  c->add_option("--corpus", o->corpus, "training text (default: the shipped corpus)");
  c->add_flag("--poison", o->poison, "fill freed memory with NaN bytes to catch use after free");
  c->add_flag("--no-profile", o->no_profile, "run without the op profiler");
  c->add_flag("--json", o->json, "print the summary as JSON");
  c->callback([o, &exit_code] {
    try {
      exit_code = run(*o);
    } catch (const std::exception& e) {
      exit_code = fail(e.what());
    }
  });
}

}  // namespace remat::cli
