// A rank's side of a parallel run: who it is, the replica it trains, its device and communicators.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <sys/resource.h>

#include "core/backend/backend_factory.h"
#include "core/dist/gloo_communicator.h"
#include "core/dist/nccl_loader.h"
#include "core/engine/pipeline_stage.h"
#include "core/engine/tensor_parallel.h"
#include "core/graph/parallel_layout.h"
#include "cli_common.h"
#include "core/util/error.h"
#include "dist_run.h"

namespace remat::cli {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int env_int(const char* name, const char* v, int lo) {
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > kMaxWorld)
    throw ConfigError(name, "must be an integer from " + std::to_string(lo) + " to " + std::to_string(kMaxWorld) +
                                ", got '" + v + "'");
  return static_cast<int>(x);
}

}  // namespace

void DistOptions::add(CLI::App& app) {
  app.add_option("--dp", dp, "data-parallel ranks: D processes of this program, the batch split over them")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--tp", tp, "tensor-parallel ranks per replica (Megatron: column/row-parallel linears, heads split)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_flag("--sp", sp, "sequence parallelism over the tensor-parallel ranks (needs --tp > 1)");
  app.add_flag("--distribute-saved-activations", distribute_saved,
               "keep each checkpointed block input (full recomputation) as 1/T per tensor-parallel rank, "
               "all-gathered before its recompute (needs --tp > 1, not with --sp)");
  app.add_option("--pp", pp, "pipeline stages P: the blocks split over P processes, micro-batches in the 1F1B order")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--micro-batches", micro_batches, "micro-batches N per replica and step with --pp (default P; at least P)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--first-stage-layers", first_stage_layers, "blocks of the first pipeline stage when it differs")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--last-stage-layers", last_stage_layers, "blocks of the last pipeline stage when it differs")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--zero", zero, "ZeRO stage over the data-parallel ranks: 1 shards the AdamW moments, 2 the gradients too, 3 the parameters too")
      ->capture_default_str()
      ->check(CLI::Range(0, 3));
  app.add_option("--dist-timeout", timeout_s,
                 "seconds a rank waits for the others (rendezvous, each collective) before the job ends")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
}

std::optional<RankEnv> rank_from_env() {
  static const char* const sets[][2] = {{"REMAT_RANK", "REMAT_WORLD_SIZE"},
                                        {"RANK", "WORLD_SIZE"},
                                        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}};
  for (const auto& s : sets) {
    const char* r = env(s[0]);
    const char* w = env(s[1]);
    if (!r && !w) continue;
    if (!r || !w)
      throw ConfigError(r ? s[1] : s[0], std::string("is not set, but ") + (r ? s[0] : s[1]) +
                                             " is: a rank needs both");
    RankEnv e;
    e.size = env_int(s[1], w, 1);
    e.rank = env_int(s[0], r, 0);
    if (e.rank >= e.size)
      throw ConfigError(s[0], std::to_string(e.rank) + " is not below " + s[1] + " " + std::to_string(e.size));
    const char* store = env("REMAT_DIST_STORE");
    if (!store && e.size > 1)
      throw ConfigError("REMAT_DIST_STORE", std::string("must name a directory all ranks reach (") + s[0] +
                                                " and " + s[1] + " are set)");
    e.store = store ? store : "";
    if (const std::string why = store && e.size > 1 ? store_dir_problem(e.store) : ""; !why.empty())
      throw ConfigError("REMAT_DIST_STORE", "'" + e.store + "' " + why +
                                                ": it must name a directory every rank reaches (create it before "
                                                "the ranks start)");
    if (const char* o = env("REMAT_RANK_OUT")) e.out = o;
    e.ours = std::string(s[0]) == "REMAT_RANK";
    const std::string first = s[0];
    const char* local_name = first == "REMAT_RANK" ? "REMAT_LOCAL_RANK"
                             : first == "RANK"     ? "LOCAL_RANK"
                                                   : "OMPI_COMM_WORLD_LOCAL_RANK";
    const char* local = env(local_name);
    e.local_rank = local ? env_int(local_name, local, 0) : e.rank;
    if (e.local_rank >= e.size)
      throw ConfigError(local_name, std::to_string(e.local_rank) + " is not below " + s[1] + " " + std::to_string(e.size));
    return e;
  }
  return std::nullopt;
}

ModelConfig replica_model(const ModelConfig& global, const DistOptions& d, int world,
                          const TrainOptions& train) {
  const int replicas = world / std::max(1, d.tp * d.pp);
  const int n = d.micro_batches_or_default();
  if (d.pp == 1 && d.micro_batches > 1)
    throw ConfigError("micro-batches", std::to_string(d.micro_batches) + " micro-batches need pipeline stages (--pp 2 or more)");
  if (d.pp == 1 && (d.first_stage_layers > 0 || d.last_stage_layers > 0))
    throw ConfigError(d.first_stage_layers > 0 ? "first-stage-layers" : "last-stage-layers",
                      "needs pipeline stages (--pp 2 or more)");
  ParallelLayout p;
  p.dp = replicas;
  p.tp = d.tp;
  p.sp = d.sp;
  p.distribute_saved_activations = d.distribute_saved;
  p.zero = d.zero;
  p.global_batch = global.batch;
  p.micro_batches = n;
  ModelConfig m = global;
  if (global.batch % (static_cast<std::int64_t>(replicas) * n) != 0)
    throw ConfigError("batch", "the global batch of " + std::to_string(global.batch) +
                                   " sequences is not divisible by --dp " + std::to_string(replicas) +
                                   " × --micro-batches " + std::to_string(n) + " (" +
                                   std::to_string(replicas * n) + ")");
  m.batch = static_cast<int>(global.batch / (static_cast<std::int64_t>(replicas) * n));  // the micro-batch
  ParallelLayout one = p;
  if (d.pp > 1) {
    p.pp = d.pp;
    p.first_stage_layers = d.first_stage_layers;
    p.last_stage_layers = d.last_stage_layers;
    check_pipeline(m, p);
  }
  validate_layout(p, m);
  if (d.tp > 1) check_tensor_parallel(m, one);
  m.batch *= n;  // the replica's batch
  if (d.zero != 0 && replicas < 2)
    throw ConfigError("zero", "ZeRO-" + std::to_string(d.zero) + " shards over the data-parallel ranks; --dp is " +
                                  std::to_string(replicas) + " (use --dp 2 or more)");
  if (world > 1 && train.device != "cpu" && train.device != "cuda")
    throw ConfigError("device", "each rank of a parallel run takes one device: --device cpu, or --device cuda for "
                                "the GPU of the rank's local rank (CUDA_VISIBLE_DEVICES picks the GPUs), not " +
                                    train.device);
  return m;
}

namespace {

// Ports a process can bind on this machine without naming one (net.ipv4.ip_local_port_range).
std::uint64_t local_ports() {
  std::FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  unsigned lo = 32768, hi = 60999;
  if (f) {
    if (std::fscanf(f, "%u %u", &lo, &hi) != 2 || hi < lo) lo = 32768, hi = 60999;
    std::fclose(f);
  }
  return std::uint64_t{hi} - lo + 1;
}

std::string count(std::uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

}  // namespace

void check_local_mesh(const DistOptions& d, int world, int rank) {
  const std::uint64_t T = static_cast<std::uint64_t>(d.tp), P = static_cast<std::uint64_t>(d.pp);
  const std::uint64_t W = static_cast<std::uint64_t>(world), D = W / std::max<std::uint64_t>(1, T * P);
  // Every group: (its size, how many of them). A rank is in one of each.
  const std::pair<std::uint64_t, std::uint64_t> groups[] = {{T, P * D}, {D, P * T}, {P, D * T}};
  std::uint64_t machine = 0, per_rank = 0;
  for (const auto& [n, k] : groups)
    if (n > 1) {
      machine += k * n * (n - 1);
      per_rank += n - 1;
    }
  if (per_rank == 0) return;
  const std::uint64_t ports = local_ports();
  const std::uint64_t need = rank >= 0 ? per_rank : machine;
  if (need > ports)
    throw Error(std::string(rank >= 0 ? "rank " + std::to_string(rank) + " of " : "") + std::to_string(world) +
                " ranks on this machine need " + count(need) +
                " listening sockets (Gloo connects every two ranks of a group over the loopback interface, each "
                "pair with a port of its own); this machine's local port range holds " + count(ports) +
                " (net.ipv4.ip_local_port_range): use fewer ranks");
  // Each pair: a listening socket and a connection, plus what the process has open anyway.
  const std::uint64_t files = 2 * per_rank + 256;
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < files) {
    if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < files)
      throw Error("each of " + std::to_string(world) + " ranks needs about " + count(files) +
                  " open files for its connections; this process may open " + count(lim.rlim_max) +
                  " (ulimit -n): use fewer ranks");
    if (rank >= 0) {
      lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? files : std::min<rlim_t>(lim.rlim_max, std::max<rlim_t>(files, lim.rlim_cur));
      ::setrlimit(RLIMIT_NOFILE, &lim);
    }
  }
}

void check_cuda_ranks(int world) {
  std::string why;
  if (!nccl_available(&why))
    throw Error("--device cuda with " + std::to_string(world) + " ranks: " + why);
  const int gpus = cuda_device_count(&why);
  if (gpus < world)
    throw Error("--device cuda with " + std::to_string(world) + " ranks needs " + std::to_string(world) +
                " GPUs, one per rank (NCCL cannot place two ranks of one communicator on one GPU); this machine has " +
                std::to_string(gpus) + " usable" + (gpus == 0 && !why.empty() ? " (" + why + ")" : ""));
}

RankRun join_ranks(const RankEnv& e, const DistOptions& d, ModelConfig& m, TrainOptions& train,
                   std::string& out) {
  RankRun r;
  r.env = e;
  if (e.size % (d.tp * d.pp) != 0)
    throw ConfigError(d.pp > 1 ? "pp" : "tp", "the world of " + std::to_string(e.size) +
                                                  " ranks is not divisible by --tp " + std::to_string(d.tp) +
                                                  " × --pp " + std::to_string(d.pp));
  m = replica_model(m, d, e.size, train);
  if (train.device == "cpu") check_local_mesh(d, e.size, e.rank);  // before any socket opens
  const int replicas = e.size / (d.tp * d.pp);
  r.tp_rank = e.rank % d.tp;
  r.dp_rank = (e.rank / d.tp) % replicas;
  r.pp_rank = e.rank / (d.tp * replicas);
  r.dist = d;
  r.dist.dp = replicas;
  train.threads = std::max(1, train.threads / e.size);
  if (!e.ours && !out.empty()) {
    r.parent_out = out;
    out = rank_out_dir(out, e.rank);
  } else if (e.ours) {
    out = e.out;
  }
  // Every rank keeps --save-weights and --save-grads: the ranks' pieces are gathered and rank 0
  // writes the file (core/engine/rank_weights.h).
  if (e.rank != 0) train.dump_batch.clear();
  // On CUDA the GPU of the local rank, or the one GPU a launcher left visible to this rank (its
  // own CUDA_VISIBLE_DEVICES); the collectives NCCL's.
  const bool cuda = train.device == "cuda";
  int gpu = 0;
  if (cuda) {
    std::string why;
    const int gpus = cuda_device_count(&why);
    gpu = gpus == 1 ? 0 : e.local_rank;
    if (gpus < 1 || gpu >= gpus)
      throw Error("rank " + std::to_string(e.rank) + " (local rank " + std::to_string(e.local_rank) +
                  ") takes CUDA device " + std::to_string(e.local_rank) + ", but this machine has " +
                  std::to_string(gpus) + " usable" + (why.empty() ? "" : " (" + why + ")"));
    train.device = "cuda:" + std::to_string(gpu);
    r.collectives = "nccl " + nccl_version();
  } else {
    r.collectives = "gloo";
  }
  // A peer that died makes writes to its socket fail with EPIPE (an Error from Gloo naming the
  // collective), not kill this rank with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  auto group = [&](int rank, int size, const std::string& prefix) -> std::unique_ptr<Communicator> {
    if (size == 1) return std::make_unique<NullCommunicator>();
    if (cuda) {
      NcclSpec n;
      n.rank = rank;
      n.size = size;
      n.device = gpu;
      n.store_dir = e.store;
      n.key = prefix + ".nccl-id";
      n.timeout = std::chrono::milliseconds(static_cast<long long>(d.timeout_s * 1000.0));
      return make_nccl_communicator(n);
    }
    GlooOptions g;
    g.rank = rank;
    g.size = size;
    g.store_dir = e.store;
    g.prefix = prefix;
    g.timeout = std::chrono::milliseconds(static_cast<long long>(d.timeout_s * 1000.0));
    return std::make_unique<GlooCommunicator>(g);
  };
  // Groups over one rendezvous, made in the same order on every rank: the T ranks of a replica's
  // stage, the D ranks of one stage's tensor slice, the P stages of one replica's tensor slice,
  // and with a tied embedding the first and the last of those stages.
  const std::string st = d.pp > 1 ? std::to_string(r.pp_rank) + "-" : "";
  if (d.tp > 1) r.tp_comm = group(r.tp_rank, d.tp, "rematlab-tp-" + st + std::to_string(r.dp_rank));
  r.comm = group(r.dp_rank, replicas,
                 d.tp > 1 || d.pp > 1 ? "rematlab-dp-" + st + std::to_string(r.tp_rank) : "rematlab");
  const std::string slice = std::to_string(r.dp_rank) + "-" + std::to_string(r.tp_rank);
  if (d.pp > 1) {
    r.pp_comm = group(r.pp_rank, d.pp, "rematlab-pp-" + slice);
    if (m.tied_embeddings && (r.pp_rank == 0 || r.pp_rank == d.pp - 1))
      r.tie_comm = group(r.pp_rank == 0 ? 0 : 1, 2, "rematlab-tie-" + slice);
  }
  train.comm = r.comm.get();
  train.tp_comm = r.tp_comm.get();
  train.pp_comm = r.pp_comm.get();
  train.tie_comm = r.tie_comm.get();
  train.tp = d.tp;
  train.sp = d.sp;
  train.distribute_saved = d.distribute_saved;
  train.zero = d.zero;
  train.pp = d.pp;
  train.micro_batches = d.micro_batches_or_default();
  train.first_stage_layers = d.first_stage_layers;
  train.last_stage_layers = d.last_stage_layers;
  return r;
}

void note_comm(Trace& t, const RankRun& r) {
  const int steps = static_cast<int>(t.step_stats.size());
  const std::uint64_t per_step = steps ? r.comm->bytes_recorded() / static_cast<std::uint64_t>(steps) : 0;
  std::uint64_t other = 0;
  for (const auto* c : {r.tp_comm.get(), r.pp_comm.get(), r.tie_comm.get()})
    if (c) other += c->bytes_recorded();
  const std::uint64_t other_per_step = steps ? other / static_cast<std::uint64_t>(steps) : 0;
  t.provenance.emplace_back("dp_rank", std::to_string(r.dp_rank));
  t.provenance.emplace_back("dp_world_size", std::to_string(r.comm->size()));
  t.provenance.emplace_back("tp_rank", std::to_string(r.tp_rank));
  t.provenance.emplace_back("tp_world_size", std::to_string(r.tp_comm ? r.tp_comm->size() : 1));
  t.provenance.emplace_back("pp_rank", std::to_string(r.pp_rank));
  t.provenance.emplace_back("pp_world_size", std::to_string(r.pp_comm ? r.pp_comm->size() : 1));
  t.provenance.emplace_back("micro_batches", std::to_string(r.dist.micro_batches_or_default()));
  if (r.dist.pp > 1) {
    ParallelLayout p;
    p.pp = r.dist.pp;
    p.first_stage_layers = r.dist.first_stage_layers;
    p.last_stage_layers = r.dist.last_stage_layers;
    t.provenance.emplace_back("stage_blocks", std::to_string(p.stage_layers(t.model, r.pp_rank)));
    // The whole model's index of the stage's block 0: a diff names its blocks by it.
    t.provenance.emplace_back("stage_first_block", std::to_string(p.stage_first_block(t.model, r.pp_rank)));
  }
  t.provenance.emplace_back("sp", r.dist.sp ? "1" : "0");
  t.provenance.emplace_back("distribute_saved_activations", r.dist.distribute_saved ? "1" : "0");
  t.provenance.emplace_back("zero", std::to_string(r.dist.zero));
  t.provenance.emplace_back("comm_bytes_per_step", std::to_string(per_step + other_per_step));
  t.provenance.emplace_back("collectives", r.collectives);
}

std::string rank_out_dir(const std::string& out, int rank) {
  return (std::filesystem::path(out) / ("rank-" + std::to_string(rank))).string();
}

int finish_rank(RankRun& r, const Trace& t) {
  int code = t.complete ? 0 : fail("rank " + std::to_string(r.env.rank) + ": run " + t.status + ": " + t.error);
  if (!r.parent_out.empty()) {
    // Under another launcher rank 0 writes the summary once every rank has written its own.
    std::string failure = t.complete ? "" : "rank " + std::to_string(r.env.rank) + ": " + t.error;
    try {
      // Every rank has written once rank 0 is past all three: each group's barrier waits for
      // ranks that passed the groups before it.
      for (Communicator* c : {r.tp_comm.get(), r.comm.get(), r.pp_comm.get()})
        if (c) c->barrier("run directories written");
    } catch (const Error& e) {
      failure = e.what();
      code = 1;
    }
    if (r.env.rank == 0)
      write_ranks_summary(r.parent_out, r.env.size, r.dist, t.model.batch * r.dist.dp, failure);
  }
  return code;
}

}  // namespace remat::cli
