#include "training.h"

#include "cli_common.h"

#include <cmath>
#include <csignal>
#include <ctime>
#include <sys/utsname.h>

#include "core/backend/backend_factory.h"
#include "core/engine/run.h"
#include "core/plugin/registry.h"
#include "core/util/error.h"

namespace remat::cli {

namespace {
std::string g_command_line;
}

void TrainOptions::add(CLI::App& app) {
  app.add_option("--device", device, "cpu | cuda | cuda:N")->capture_default_str();
  app.add_option("--steps", steps, "counted steps")->capture_default_str()->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", warmup, "steps run first and not counted")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--seed", seed, "seed for weights, batches and dropout (0 to 2^64 - 1)")
      ->capture_default_str()
      ->check(unsigned_64());
  app.add_option("--threads", threads, "CPU threads (OpenBLAS and our ops)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--memory-limit", memory_limit,
                 "refuse runs predicted to need more device memory (default: what is available)");
  app.add_option("--lr", lr, "AdamW learning rate")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](const std::string& v) {
            double x = 0;
            try {
              x = std::stod(v);
            } catch (const std::exception&) {
              return std::string("not a number: ") + v;
            }
            return std::isfinite(x) && x > 0 ? std::string() : "must be a positive finite number, got " + v;
          },
          "POSITIVE", "positive finite"));
  app.add_option("--beta1", beta1, "AdamW beta1, in [0, 1)")->capture_default_str()->check(CLI::Range(0.0, 0.999999999));
  app.add_option("--beta2", beta2, "AdamW beta2, in [0, 1)")->capture_default_str()->check(CLI::Range(0.0, 0.999999999));
  app.add_option("--eps", eps, "AdamW epsilon")->capture_default_str()->check(CLI::Range(1e-30, 1.0));
  app.add_option("--weight-decay", weight_decay, "AdamW decoupled weight decay (matrices only: docs/batch.md)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  CLI::Option* corpus_opt = app.add_option("--corpus", corpus, "training text (default: the shipped corpus)");
  app.add_option("--tokens", tokens, "train on these token ids: a .npy file or raw little-endian integers")
      ->excludes(corpus_opt);
  app.add_option("--tokens-dtype", tokens_dtype, "integer type of a raw --tokens file: u8 u16 i16 u32 i32 i64 u64 (default u16)");
  app.add_option("--dump-batch", dump_batch, "write the tokens every step used to this .npy file: int32 [steps, batch, seq + 1]");
  app.add_flag("--poison", poison, "fill freed memory with NaN bytes to catch use after free");
  app.add_flag("--no-profile", no_profile, "run without the op profiler");
}

Trace train(const ModelConfig& m, const Schedule& s, const TrainOptions& o,
            std::optional<std::uint64_t> memory_budget,
            const std::function<void(double, const std::string&)>& progress,
            const std::atomic<bool>* cancel, const WeightOptions& weights) {
  RunSpec spec;
  spec.model = m;
  spec.schedule = s;
  spec.steps = o.steps;
  spec.warmup = o.warmup;
  spec.seed = o.seed;
  spec.poison = o.poison;
  spec.adam.lr = static_cast<float>(o.lr);
  spec.adam.beta1 = static_cast<float>(o.beta1);
  spec.adam.beta2 = static_cast<float>(o.beta2);
  spec.adam.eps = static_cast<float>(o.eps);
  spec.adam.weight_decay = static_cast<float>(o.weight_decay);
  spec.corpus_path = o.corpus;
  spec.tokens_path = o.tokens;
  spec.tokens_dtype = o.tokens_dtype;
  spec.dump_batch_path = o.dump_batch;
  spec.weights_in = weights.load;
  spec.weights_out = weights.save;
  spec.grads_out = weights.save_grads;
  spec.shard_bytes = weights.shard_bytes;
  spec.inputs = o.inputs;
  spec.comm = o.comm;
  spec.tp_comm = o.tp_comm;
  spec.layout.tp = o.tp;
  spec.layout.sp = o.sp;
  spec.layout.distribute_saved_activations = o.distribute_saved;
  spec.layout.zero = o.zero;
  spec.layout.pp = o.pp;
  spec.layout.micro_batches = o.micro_batches;
  spec.layout.first_stage_layers = o.first_stage_layers;
  spec.layout.last_stage_layers = o.last_stage_layers;
  spec.pp_comm = o.pp_comm;
  spec.tie_comm = o.tie_comm;
  if (!o.memory_limit.empty()) spec.memory_limit = parse_bytes("memory-limit", o.memory_limit);
  SteadyClock clock;
  Device dev = make_device(o.device, o.threads, clock, !o.no_profile);
  if (dev.profiler) dev.profiler->set_comm_groups(layout_groups(o.comm, o.tp_comm, o.pp_comm, o.tie_comm));
  const double device_ms = static_cast<double>(clock.now_ns()) / 1e6;
  RunCallbacks cb;
  cb.cancel = cancel;
  cb.progress = progress;
  Trace t;
  try {
    t = run_training(spec, *dev.backend, dev.profiler.get(), clock, cb);
  } catch (const OutOfMemoryError& e) {
    t = refused_run(spec, *dev.backend, e);  // refused before the first step
  }
  t.startup_breakdown_ms.insert(t.startup_breakdown_ms.begin(), {"device", device_ms});
  t.memory_budget = memory_budget.value_or(0);
  add_cli_provenance(t);
  return t;
}

void set_command_line(int argc, char** argv) {
  g_command_line.clear();
  for (int i = 0; i < argc; ++i) {
    if (i) g_command_line += ' ';
    std::string a = argv[i];
    if (a.find_first_of(" \t\"'") != std::string::npos) a = "'" + a + "'";
    g_command_line += a;
  }
}

void add_cli_provenance(Trace& t) {
  auto set = [&t](const std::string& k, const std::string& v) {
    for (auto& [key, val] : t.provenance)
      if (key == k) {
        val = v;
        return;
      }
    t.provenance.emplace_back(k, v);
  };
  if (!g_command_line.empty()) set("command", g_command_line);
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  set("created", buf);
  utsname u{};
  if (uname(&u) == 0) set("os", std::string(u.sysname) + " " + u.release + " " + u.machine);
  set("format_version", std::to_string(t.format_version));
}

std::atomic<bool>& interrupt_flag() {
  static std::atomic<bool> flag{false};
  static bool installed = [] {
    // SIGTERM (timeout, batch schedulers, docker stop) ends a run as Ctrl-C does: kept, marked
    // cancelled.
    std::signal(SIGINT, [](int) { flag.store(true); });
    std::signal(SIGTERM, [](int) { flag.store(true); });
    return true;
  }();
  (void)installed;
  return flag;
}

}  // namespace remat::cli
