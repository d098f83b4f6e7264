// A rank's side of a data-parallel run: who it is, the replica it trains, its communicator.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "core/dist/gloo_communicator.h"
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
  if (errno || end == v || *end || x < lo || x > 1 << 20)
    throw ConfigError(name, std::string("must be an integer of at least ") + std::to_string(lo) +
                                ", got '" + v + "'");
  return static_cast<int>(x);
}

}  // namespace

void DistOptions::add(CLI::App& app) {
  app.add_option("--dp", dp, "data-parallel ranks: D processes of this program, the batch split over them")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--zero", zero, "ZeRO stage of the data-parallel run (runs do 0; plan predicts 1 to 3)")
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
    if (const char* o = env("REMAT_RANK_OUT")) e.out = o;
    e.ours = std::string(s[0]) == "REMAT_RANK";
    return e;
  }
  return std::nullopt;
}

ModelConfig replica_model(const ModelConfig& global, const DistOptions& d, int world,
                          const TrainOptions& train) {
  ParallelLayout p;
  p.dp = world;
  p.zero = d.zero;
  p.global_batch = global.batch;
  p.micro_batches = 1;
  ModelConfig m = global;
  m.batch = global.batch % world == 0 ? global.batch / world : 1;  // not divisible: refused below
  validate_layout(p, m);
  if (d.zero != 0)
    throw ConfigError("zero", "runs shard nothing yet: a data-parallel run is ZeRO 0 (plan --dp " +
                                  std::to_string(world) + " --zero " + std::to_string(d.zero) +
                                  " predicts stage " + std::to_string(d.zero) + ")");
  if (world > 1 && train.device != "cpu")
    throw ConfigError("device", "data-parallel runs run on the CPU (their gradients are summed in host memory), got " +
                                    train.device);
  if (world > 1 && m.dtype != DType::F32)
    throw ConfigError("dtype", std::string("data-parallel runs sum fp32 gradients, the model is ") +
                                   to_string(m.dtype) + " (use --dtype fp32)");
  return m;
}

RankRun join_ranks(const RankEnv& e, const DistOptions& d, ModelConfig& m, TrainOptions& train,
                   std::string& out, std::string& weights_out, std::string& grads_out) {
  RankRun r;
  r.env = e;
  m = replica_model(m, d, e.size, train);
  train.threads = std::max(1, train.threads / e.size);
  if (!e.ours && !out.empty()) {
    r.parent_out = out;
    out = (std::filesystem::path(out) / ("rank-" + std::to_string(e.rank))).string();
  } else if (e.ours) {
    out = e.out;
  }
  if (e.rank != 0) {
    weights_out.clear();
    grads_out.clear();
    train.dump_batch.clear();
  }
  // A peer that died makes writes to its socket fail with EPIPE (an Error from Gloo naming the
  // collective), not kill this rank with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  if (e.size == 1) {
    r.comm = std::make_unique<NullCommunicator>();
  } else {
    GlooOptions g;
    g.rank = e.rank;
    g.size = e.size;
    g.store_dir = e.store;
    g.timeout = std::chrono::milliseconds(static_cast<long long>(d.timeout_s * 1000.0));
    r.comm = std::make_unique<GlooCommunicator>(g);
  }
  train.comm = r.comm.get();
  return r;
}

void note_comm(Trace& t, const RankRun& r) {
  const int steps = static_cast<int>(t.step_stats.size());
  const std::uint64_t per_step = steps ? r.comm->bytes_recorded() / static_cast<std::uint64_t>(steps) : 0;
  t.provenance.emplace_back("dp_rank", std::to_string(r.env.rank));
  t.provenance.emplace_back("dp_world_size", std::to_string(r.env.size));
  t.provenance.emplace_back("comm_bytes_per_step", std::to_string(per_step));
}

int finish_rank(RankRun& r, const Trace& t) {
  int code = t.complete ? 0 : fail("rank " + std::to_string(r.env.rank) + ": run " + t.status + ": " + t.error);
  if (!r.parent_out.empty()) {
    // Under another launcher rank 0 writes the summary once every rank has written its own.
    std::string failure = t.complete ? "" : "rank " + std::to_string(r.env.rank) + ": " + t.error;
    try {
      r.comm->barrier("run directories written");
    } catch (const Error& e) {
      failure = e.what();
      code = 1;
    }
    if (r.env.rank == 0) {
      DistOptions d;
      d.dp = r.env.size;
      write_ranks_summary(r.parent_out, r.env.size, d, t.model.batch * r.env.size, failure);
    }
  }
  return code;
}

}  // namespace remat::cli
