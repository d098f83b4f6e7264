// A whole run: check the model and schedule, predict memory, refuse what does not fit, train
// warmup + counted steps, and return the trace. Errors before the first step throw; errors
// during the run (out of memory, cancel) end it cleanly with what was traced so far.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/dist/communicator.h"
#include "core/graph/parallel_layout.h"
#include "core/memory/tracking_allocator.h"
#include "core/profiler/profiler.h"
#include "core/schedule/schedule.h"
#include "core/trace/trace.h"
#include "core/util/error.h"

namespace remat {

struct RunSpec {
  ModelConfig model;
  Schedule schedule;
  int steps = 1;    // counted
  int warmup = 1;   // run first, not counted
  std::uint64_t seed = 0;
  bool poison = false;             // poison freed memory (debug)
  std::uint64_t memory_limit = 0;  // device bytes; 0 = what the device has available now
  AdamArgs adam;
  std::string corpus_path;         // empty: the shipped corpus
  std::string tokens_path;         // token ids to train on instead of a corpus (TokenFile)
  std::string tokens_dtype;        // of a raw token file ("" = u16; .npy files say their own)
  std::string dump_batch_path;     // .npy of the tokens every step used: [steps, batch, seq + 1]
  std::string weights_in;          // weights to start from (weight_files.h; empty: initialize from seed)
  std::string weights_out;         // safetensors to write after the last step
  std::string grads_out;           // safetensors of the last step's gradients (weights' names)
  std::uint64_t shard_bytes = 0;   // weights_out and grads_out: 0 one file each, else directories
                                   // of shards of about this many bytes and their index
  // Other files the front end read for this run (a model file, a schedule) with the option that
  // named them: like the token file, the corpus and --load-weights, never written over.
  std::vector<std::pair<std::string, std::string>> inputs;
  Communicator* comm = nullptr;    // data parallelism: this replica of comm->size() (the model's
                                   // batch is one replica's slice); none: one process
  // Tensor parallelism: the layout's tp and sp (the rest ignored) and this rank's communicator
  // over the T ranks of its replica; `model` stays the whole model, the rank runs its share
  // (per_rank_graph) and the schedule is planned for that block table.
  ParallelLayout layout;
  Communicator* tp_comm = nullptr;
  // Pipeline stages: the layout's pp and micro_batches N, this rank's group over the P stages of
  // its replica and tensor slice (its rank is the stage) and, with a tied embedding on the first
  // or the last stage, the pair of those two. `model.batch` stays the replica's batch; the stage
  // runs N micro-batches of batch / N sequences over its blocks (executor_pipeline.cpp) and the
  // schedule is planned for per_rank_graph of that micro-batch's model and the stage.
  Communicator* pp_comm = nullptr;
  Communicator* tie_comm = nullptr;
};

struct RunCallbacks {
  // fraction done in [0, 1], and what is happening
  std::function<void(double, const std::string&)> progress;
  const std::atomic<bool>* cancel = nullptr;
};

Trace run_training(const RunSpec& spec, Backend& backend, Profiler* profiler, Clock& clock,
                   const RunCallbacks& cb = {});

// The trace of a run refused before its first step (the prediction exceeds the memory limit):
// incomplete, nothing measured, with the model, schedule, device and predicted bytes, so front
// ends can save and show it like any other run.
Trace refused_run(const RunSpec& spec, const Backend& backend, const OutOfMemoryError& e);


}  // namespace remat
