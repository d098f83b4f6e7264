// Data-parallel runs of rematlab-batch: `run --dp D` validates the layout, then starts D
// processes of this program, one per rank, and waits for them (dist_launch.cpp); a process that
// a launcher started as a rank (ours, torchrun or mpirun: the environment says so) joins the
// others and trains its slice of the global batch (dist_rank.cpp). The run directory holds each
// rank's run directory as rank-N/ and ranks.json over them (ranks_summary.cpp).
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "core/dist/communicator.h"
#include "core/model/model_config.h"
#include "core/trace/trace.h"
#include "training.h"

namespace remat::cli {

// The most ranks a job may have (WORLD_SIZE and the like).
inline constexpr int kMaxWorld = 1 << 20;

struct DistOptions {
  int dp = 1;               // D: data-parallel ranks
  int tp = 1;               // T: tensor-parallel ranks per replica (rank = d·T + t)
  bool sp = false;          // sequence parallelism over the T ranks
  bool distribute_saved = false;  // checkpointed block inputs split over the T ranks (not with sp)
  int pp = 1;               // P: pipeline stages (1F1B); rank = (p·D + d)·T + t
  int micro_batches = 0;    // N per replica and step with pp > 1 (0: P)
  int first_stage_layers = 0, last_stage_layers = 0;  // blocks of the first / last stage (0: L/P)
  int world() const { return dp * tp * pp; }
  int micro_batches_or_default() const { return pp > 1 ? (micro_batches > 0 ? micro_batches : pp) : 1; }
  int zero = 0;             // ZeRO stage over the D ranks (zero_shard.h); needs dp > 1
  double timeout_s = 60;    // rendezvous and every collective; a rank past it ends the job
  void add(CLI::App& app);
};

// The rank a launcher made of this process: REMAT_RANK / REMAT_WORLD_SIZE (ours), else RANK /
// WORLD_SIZE (torchrun), else OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE (mpirun), with
// REMAT_DIST_STORE the rendezvous directory every rank reaches. The rank on its machine (the
// GPU it takes with --device cuda, unless only one is visible to it) is the set's
// REMAT_LOCAL_RANK, LOCAL_RANK or OMPI_COMM_WORLD_LOCAL_RANK, else the rank (one machine).
// Nothing set: not a rank.
// Throws ConfigError for a partial or bad set (naming the variable).
struct RankEnv {
  int rank = 0, size = 1;
  int local_rank = 0;
  std::string store;
  std::string out;   // REMAT_RANK_OUT: where our launcher wants this rank's run directory
  bool ours = false;  // started by `run --dp` (which writes ranks.json itself)
};
std::optional<RankEnv> rank_from_env();

// The model one of `world` replicas trains: the model's batch is the global batch, split over
// the replicas, after ParallelLayout's checks (batch divisible by D, zero 0..3, heads, kv-heads,
// ffn and vocab divisible by T, the sequence with sp, layers by P, at least P micro-batches,
// the replica's batch by N) and the runs' own (ZeRO only with D > 1; --device cpu or cuda, not
// cuda:N: each CUDA rank takes the GPU of its local rank). The world is T·D·P ranks. Throws
// ConfigError / Error with the numbers.
ModelConfig replica_model(const ModelConfig& global, const DistOptions& d, int world,
                          const TrainOptions& train);

// Before any CUDA rank starts: `world` ranks on this machine need NCCL and as many usable GPUs.
// Throws Error with the numbers and the reason.
void check_cuda_ranks(int world);

// Before any Gloo rank opens a socket: Gloo's full mesh over the loopback interface gives every
// pair of a group's ranks a listening socket and a connection, so the groups of `world` ranks
// laid out as `d` (or, with rank >= 0, the groups of that one rank) must fit this machine's local
// port range (net.ipv4.ip_local_port_range) and each rank's connections its open-file limit
// (raised to the hard limit first). Throws Error with the numbers.
void check_local_mesh(const DistOptions& d, int world, int rank = -1);

// Starts --dp ranks of this program and waits for them; writes `out` (or a temporary directory
// when empty) with rank-N/ and ranks.json, prints the summary, returns the exit code.
int launch_ranks(const DistOptions& d, const ModelConfig& global, const TrainOptions& train,
                 const std::string& out, bool force, bool json);

// A rank's side: connects to the others (Gloo on the CPU, NCCL on CUDA, the timeout of
// --dist-timeout) and adjusts what this process runs: the replica's model, the device (cuda:L
// for local rank L), threads (--threads / D, at least 1), the run
// directory (REMAT_RANK_OUT, or OUT/rank-N under another launcher), and only rank 0 writes
// --dump-batch (--save-weights and --save-grads: every rank takes part, rank 0 writes).
struct RankRun {
  RankEnv env;
  int tp_rank = 0, dp_rank = 0, pp_rank = 0;  // rank = (pp_rank·D + dp_rank)·T + tp_rank
  std::unique_ptr<Communicator> comm;     // over the D replicas (the same stage and tp_rank)
  std::unique_ptr<Communicator> tp_comm;  // over the T ranks of this replica's stage; null when T = 1
  std::unique_ptr<Communicator> pp_comm;  // over the P stages (the same dp_rank, tp_rank); null when P = 1
  std::unique_ptr<Communicator> tie_comm; // a tied embedding's first and last stage; else null
  DistOptions dist;                       // the layout, for ranks.json
  std::string collectives;                // "gloo" or "nccl <version>", for the provenance
  std::string parent_out;  // under another launcher: OUT, where rank 0 writes ranks.json
};
RankRun join_ranks(const RankEnv& env, const DistOptions& d, ModelConfig& m, TrainOptions& train,
                   std::string& out);
// A rank's run directory inside a job's OUT: OUT/rank-N.
std::string rank_out_dir(const std::string& out, int rank);
// After the rank's run directory is written: the communicated bytes in its provenance are set
// before that (note_comm); here the ranks meet once more, and under another launcher rank 0
// writes ranks.json. Returns the rank's exit code.
void note_comm(Trace& t, const RankRun& r);
int finish_rank(RankRun& r, const Trace& t);

// ranks.json of `dir` from its rank-N/summary.json files; `failure` empty when every rank
// finished. Returns the JSON written.
nlohmann::json write_ranks_summary(const std::string& dir, int world, const DistOptions& d,
                                   std::int64_t global_batch, const std::string& failure);

}  // namespace remat::cli
