#include "core/engine/run.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "core/data/corpus.h"
#include "core/engine/data_parallel.h"
#include "core/engine/executor.h"
#include "core/engine/model_state.h"
#include "core/engine/rank_prediction.h"
#include "core/engine/rank_weights.h"
#include "core/engine/pipeline_stage.h"
#include "core/engine/simulator.h"
#include "core/engine/tensor_parallel.h"
#include "core/engine/weight_init.h"
#include "core/io/weight_files.h"
#include "core/util/error.h"
#include "core/util/hash.h"
#include "core/util/host_memory.h"
#include "core/util/paths.h"

namespace remat {

namespace fs = std::filesystem;

namespace {

// On an asynchronous backend host times are when work was queued, not when it ran: move
// memory events onto the ops' time axis (an event belongs just before the op that followed it).
void retime_events(std::vector<MemoryEvent>& ev, std::size_t from, const std::vector<OpRecord>& ops) {
  if (ops.empty()) return;
  std::vector<std::pair<std::uint64_t, std::int64_t>> start;  // op id -> first start
  for (const auto& r : ops) start.push_back({r.op_id, r.start_ns});
  std::sort(start.begin(), start.end());
  std::int64_t last_end = 0;
  for (const auto& r : ops) last_end = std::max(last_end, r.end_ns);
  for (std::size_t i = from; i < ev.size(); ++i) {
    auto it = std::lower_bound(start.begin(), start.end(),
                               std::make_pair(ev[i].op_seq, std::int64_t{INT64_MIN}));
    ev[i].t_ns = it == start.end() ? last_end : it->second;
  }
  // Keep the order of events monotonic in time.
  for (std::size_t i = from + 1; i < ev.size(); ++i) ev[i].t_ns = std::max(ev[i].t_ns, ev[i - 1].t_ns);
}

// Schedule records carry op-id ranges from the executor; turn them into times.
void time_schedule(std::vector<ScheduleRecord>& recs, const std::vector<OpRecord>& ops) {
  std::unordered_map<std::uint64_t, std::pair<std::int64_t, std::int64_t>> span;
  for (const auto& r : ops) {
    auto [it, fresh] = span.try_emplace(r.op_id, r.start_ns, r.end_ns);
    if (!fresh) {
      it->second.first = std::min(it->second.first, r.start_ns);
      it->second.second = std::max(it->second.second, r.end_ns);
    }
  }
  std::int64_t prev = ops.empty() ? 0 : ops.front().start_ns;
  for (auto& rec : recs) {
    auto first = static_cast<std::uint64_t>(rec.start_ns), last = static_cast<std::uint64_t>(rec.end_ns);
    std::int64_t s = INT64_MAX, e = INT64_MIN;
    for (std::uint64_t id = first; id <= last && last >= first; ++id) {
      auto it = span.find(id);
      if (it == span.end()) continue;
      s = std::min(s, it->second.first);
      e = std::max(e, it->second.second);
    }
    if (s == INT64_MAX) s = e = prev;
    rec.start_ns = s;
    rec.end_ns = e;
    prev = e;
  }
}

void time_ledger(std::vector<LedgerEntry>& ledger, const std::vector<MemoryEvent>& ev, std::size_t from) {
  std::unordered_map<std::uint64_t, std::pair<std::int64_t, std::int64_t>> t;
  for (std::size_t i = from; i < ev.size(); ++i) {
    auto& x = t[ev[i].id];
    if (ev[i].delta > 0 && x.first == 0) x.first = ev[i].t_ns;
    if (ev[i].delta < 0) x.second = ev[i].t_ns;
  }
  for (auto& l : ledger) {
    l.created_ns = t[l.alloc_id].first;
    l.freed_ns = t[l.free_id].second;
  }
}

std::vector<std::pair<std::string, std::uint64_t>> tensors_at(const TrackingAllocator& a,
                                                              std::size_t peak_event,
                                                              std::size_t n) {
  std::unordered_map<std::uint64_t, std::pair<std::string, std::uint64_t>> live;
  const auto& ev = a.events();
  for (std::size_t i = 0; i <= peak_event && i < ev.size(); ++i) {
    if (ev[i].space != Space::Device) continue;
    if (ev[i].delta > 0) {
      std::string nm = a.names()[ev[i].tensor];
      if (ev[i].block >= 0) nm = "h" + std::to_string(ev[i].block) + "." + nm;
      live[ev[i].id] = {nm, static_cast<std::uint64_t>(ev[i].delta)};
    } else {
      live.erase(ev[i].id);
    }
  }
  std::vector<std::pair<std::string, std::uint64_t>> v;
  for (auto& [id, x] : live) v.push_back(x);
  std::sort(v.begin(), v.end(), [](auto& x, auto& y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
  if (v.size() > n) v.resize(n);
  return v;
}

void check_adam(const AdamArgs& a) {
  auto bad = [](const char* field, const std::string& what, double v) {
    throw ConfigError(field, what + ", got " + std::to_string(v));
  };
  if (!(std::isfinite(a.lr) && a.lr > 0.0f)) bad("lr", "the learning rate must be a positive finite number", a.lr);
  if (!(a.beta1 >= 0.0f && a.beta1 < 1.0f)) bad("beta1", "AdamW's beta1 must be in [0, 1)", a.beta1);
  if (!(a.beta2 >= 0.0f && a.beta2 < 1.0f)) bad("beta2", "AdamW's beta2 must be in [0, 1)", a.beta2);
  if (!(std::isfinite(a.eps) && a.eps > 0.0f)) bad("eps", "AdamW's epsilon must be a positive finite number", a.eps);
  if (!(std::isfinite(a.weight_decay) && a.weight_decay >= 0.0f))
    bad("weight_decay", "the weight decay must be a finite number >= 0", a.weight_decay);
}

// One row per sequence: its seq tokens and the last target (the window the step read).
void append_window(std::vector<std::int32_t>& out, const std::vector<std::int32_t>& tok,
                   const std::vector<std::int32_t>& tgt, int seq) {
  const std::size_t S = static_cast<std::size_t>(seq);
  for (std::size_t r = 0; r * S < tok.size(); ++r) {
    out.insert(out.end(), tok.begin() + static_cast<std::ptrdiff_t>(r * S),
               tok.begin() + static_cast<std::ptrdiff_t>((r + 1) * S));
    out.push_back(tgt[(r + 1) * S - 1]);
  }
}

void dump_batches(const std::string& path, const std::vector<std::int32_t>& rows, const ModelConfig& m,
                  const InputFiles& inputs) {
  const std::int64_t per_step = static_cast<std::int64_t>(m.batch) * (m.seq + 1);
  write_npy_i32(path, {static_cast<std::int64_t>(rows.size()) / per_step, m.batch, m.seq + 1}, rows, inputs,
                "--dump-batch");
}

// The files the run reads: none of them is ever written over (output_file.h).
InputFiles run_inputs(const RunSpec& spec, const std::optional<WeightFiles>& weights) {
  InputFiles in;
  in.add(spec.tokens_path, "--tokens");
  in.add(spec.corpus_path, "--corpus");
  in.add(spec.weights_in, "--load-weights");
  if (weights)
    for (const auto& p : weights->paths()) in.add(p, "--load-weights");
  for (const auto& [path, what] : spec.inputs) in.add(path, what);
  return in;
}

// Before any work: each output can be written, and no two options name one file.
void check_run_outputs(const RunSpec& spec, const InputFiles& inputs) {
  const std::pair<const std::string*, const char*> outs[] = {
      {&spec.dump_batch_path, "--dump-batch"}, {&spec.weights_out, "--save-weights"}, {&spec.grads_out, "--save-grads"}};
  InputFiles written;
  // The same place by another spelling (a directory of shards not made yet has no identity).
  auto same = [](const std::string& a, const std::string& b) {
    return a == b || fs::absolute(a).lexically_normal() == fs::absolute(b).lexically_normal();
  };
  for (const auto& [path, what] : outs) {
    if (path->empty()) continue;
    const bool sharded = spec.shard_bytes > 0 && path != &spec.dump_batch_path;
    if (sharded) check_sharded_output(*path, ParamLayout(spec.model), spec.shard_bytes, inputs, what);
    else check_writable(*path, inputs, what);
    for (const auto& [other, other_what] : outs)
      if (other != path && !other->empty() && same(*other, *path) && std::string(what) < other_what)
        throw Error(std::string(what) + " and " + other_what + " both name '" + *path + "'");
    if (auto id = file_id(*path); id && !written.which(*id).empty())
      throw Error(std::string(what) + " '" + *path + "' is the file " + written.which(*id) + " writes");
    written.add(*path, what);
  }
}

}  // namespace

Trace refused_run(const RunSpec& spec, const Backend& backend, const OutOfMemoryError& e) {
  Trace t;
  t.complete = false;
  t.status = "out_of_memory";
  t.error = e.what();
  t.model = spec.model;
  t.policy = spec.schedule.policy;
  t.policy_params = spec.schedule.params;
  t.schedule = spec.schedule;
  t.device = backend.name();
  t.seed = spec.seed;
  t.warmup = spec.warmup;
  t.steps = spec.steps;
  t.provenance = backend.describe();
  t.predicted_peak_bytes = e.needed();
  return t;
}

Trace run_training(const RunSpec& spec, Backend& backend, Profiler* profiler, Clock& clock,
                   const RunCallbacks& cb) {
  const std::int64_t run_start = clock.now_ns();
  spec.model.validate();
  if (spec.steps < 1) throw ConfigError("steps", "must be at least 1, got " + std::to_string(spec.steps));
  if (spec.warmup < 0) throw ConfigError("warmup", "must be 0 or more, got " + std::to_string(spec.warmup));
  Trace tr;
  tr.model = spec.model;
  tr.policy = spec.schedule.policy;
  tr.policy_params = spec.schedule.params;
  tr.schedule = spec.schedule;
  tr.device = backend.name();
  tr.seed = spec.seed;
  tr.warmup = spec.warmup;
  tr.steps = spec.steps;
  tr.provenance = backend.describe();
  std::int64_t part_start = run_start;
  auto part_done = [&](const char* name, std::int64_t now) {
    tr.startup_breakdown_ms.emplace_back(name, static_cast<double>(now - part_start) / 1e6);
    part_start = now;
  };

  check_adam(spec.adam);
  // The weights' files and headers, checked against the model before anything else runs.
  std::optional<WeightFiles> weights;
  if (!spec.weights_in.empty()) {
    weights = open_weight_files(spec.weights_in);
    check_weight_files(*weights, ParamLayout(spec.model), spec.model.family);
  }
  const InputFiles inputs = run_inputs(spec, weights);
  check_run_outputs(spec, inputs);
  const bool tp = spec.layout.tp > 1;
  const bool pp = spec.layout.pp > 1;
  ParallelLayout one_stage = spec.layout;
  one_stage.pp = 1;
  one_stage.micro_batches = 1;
  one_stage.first_stage_layers = one_stage.last_stage_layers = 0;
  if (tp) check_tensor_parallel(spec.model, one_stage);
  // Pipeline stages: the layout as plan has it (the model's batch the micro-batch).
  ParallelLayout stages = spec.layout;
  ModelConfig micro = spec.model;
  int stage = 0;
  if (pp) {
    const int n = std::max(1, spec.layout.micro_batches);
    if (!spec.pp_comm || spec.pp_comm->size() != spec.layout.pp)
      throw Error("a pipeline stage needs a communicator over the " + std::to_string(spec.layout.pp) + " stages");
    if (spec.model.batch % n != 0)
      throw ConfigError("micro-batches", "the replica's batch of " + std::to_string(spec.model.batch) +
                                             " sequences is not divisible by " + std::to_string(n) + " micro-batches");
    micro.batch = spec.model.batch / n;
    stages.micro_batches = n;
    stages.global_batch = 0;
    stages.dp = replicas_of(spec.comm);
    check_pipeline(micro, stages);
    stage = spec.pp_comm->rank();
  }
  // ZeRO over the data-parallel ranks (zero_shard.h); every rank allocates the same bytes.
  const int zero = spec.layout.zero, dp = replicas_of(spec.comm);
  if (zero < 0 || zero > 3) throw ConfigError("zero", "must be 0, 1, 2 or 3, got " + std::to_string(zero));
  if (zero > 0 && dp < 2)
    throw ConfigError("zero", "ZeRO-" + std::to_string(zero) + " shards over the data-parallel ranks; the run has " +
                                  std::to_string(dp) + " (use --dp 2 or more)");
  const BlockGraph graph = pp ? per_rank_graph(micro, stages, stage)
                          : tp ? per_rank_graph(spec.model, one_stage) : BlockGraph(spec.model);
  if (spec.layout.distribute_saved_activations) check_distributed_schedule(spec.schedule, graph.config().layers);
  ParallelLayout rank_layout = one_stage;
  rank_layout.zero = zero;
  rank_layout.dp = dp;
  // validates the schedule
  Prediction pred = pp ? simulate_stage(micro, stages, stage, spec.schedule, &backend)
                       : simulate(graph, spec.schedule, &backend, rank_layout);
  part_done("simulate", clock.now_ns());
  tr.plan = pred.plan;
  tr.predicted_peak_bytes = pred.peak_bytes;
  std::uint64_t avail = spec.memory_limit ? spec.memory_limit : backend.available_memory();
  if (!spec.memory_limit && avail == 0 && backend.name() == "cpu") avail = host_memory_available();
  if (avail > 0 && pred.peak_bytes > avail)
    throw OutOfMemoryError("the run needs " + std::to_string(pred.peak_bytes) +
                               " bytes of device memory (predicted), but " + std::to_string(avail) +
                               " are available" + (spec.memory_limit ? " under --memory-limit" : ""),
                           pred.peak_bytes, avail);
  if (!spec.tokens_path.empty() && !spec.corpus_path.empty())
    throw Error("a run trains on a corpus or on a token file, not both");
  const Corpus corpus = !spec.tokens_path.empty()
                            ? Corpus::from_tokens(TokenFile::open(spec.tokens_path, spec.tokens_dtype))
                            : Corpus::from_file(spec.corpus_path.empty() ? default_corpus_path() : spec.corpus_path);
  tr.provenance.emplace_back("data", spec.tokens_path.empty()
                                         ? "corpus " + (spec.corpus_path.empty() ? std::string("(shipped)") : spec.corpus_path)
                                         : "tokens " + spec.tokens_path);
  part_done("corpus", clock.now_ns());
  std::vector<std::int32_t> dumped;  // --dump-batch: each step's window, seq + 1 tokens a row

  TrackingAllocator alloc(backend.memory(Space::Device), backend.memory(Space::Host), clock);
  alloc.set_poison(spec.poison);
  if (spec.memory_limit) alloc.set_device_limit(spec.memory_limit);
  const int total = spec.warmup + spec.steps;
  try {
    ModelState state(graph.config(), backend, alloc, make_zero_shard(zero, dp, replica_of(spec.comm), 0),
                     pp ? stage_cut(micro, stages, stage).parts : LayoutParts{});
    tr.static_bytes = state.static_bytes();
    part_done("memory", clock.now_ns());
    // Where this rank's pieces of the whole model lie (rank_weights.h): files are the whole model's.
    RankPlace place{tp ? spec.layout.tp : 1, tp_rank_of(spec.tp_comm), spec.tp_comm, spec.comm};
    if (pp) {
      place.stages = &stages;
      place.stage = stage;
      place.pp_comm = spec.pp_comm;
    }
    const bool pieces =
        tp || pp || state.zero().parameters() || state.zero().gradients() || state.master_sharded();
    if (!spec.weights_in.empty()) {
      if (pieces) load_rank_weights(*weights, state, spec.model, place);
      else state.write_params(weight_values(*weights, state.layout(), spec.model.family));
    } else if (pp) {
      // The stage's parameters (a tensor-parallel rank's slices of them) of the single-process
      // initialization, drawn alone; under ZeRO-3 this rank's shard of them, zeros past the end.
      std::vector<float> w = stage_weight_values(micro, stages, stage, tp_rank_of(spec.tp_comm), spec.seed,
                                                 backend.host_threads());
      const ZeroShard& z = state.zero();
      if (z.parameters()) {
        std::vector<float> mine(static_cast<std::size_t>(z.shard()), 0.0f);
        std::copy_n(w.begin() + z.begin(), z.count(), mine.begin());
        w.swap(mine);
      }
      state.write_params(w);
    } else if (state.zero().parameters()) {
      // This rank's shard of the single-process initialization (of a tensor-parallel rank's
      // slices of it), drawn alone; zeros past the end.
      const ZeroShard& z = state.zero();
      const ParamLayout whole(spec.model);
      const std::vector<WeightRun> runs =
          tp ? rank_weight_runs(spec.model, spec.layout.tp, tp_rank_of(spec.tp_comm)) : layout_weight_runs(whole);
      std::vector<float> mine(static_cast<std::size_t>(z.shard()), 0.0f);
      init_weight_runs(whole, spec.model.layers, spec.seed, runs_within(runs, z.begin(), z.count()), mine.data(),
                       backend.host_threads());
      state.write_params(mine);
    } else if (tp) {
      // This rank's slices of the single-process initialization, drawn alone.
      state.write_params(rank_weight_values(spec.model, spec.layout.tp, tp_rank_of(spec.tp_comm),
                                            spec.seed, backend.host_threads()));
    } else {
      state.init_weights(spec.seed);
    }
    part_done("weights", clock.now_ns());
    ExecOptions eo;
    eo.seed = spec.seed;
    eo.adam = spec.adam;
    eo.cancel = cb.cancel;
    eo.comm = spec.comm;
    eo.tp_comm = spec.tp_comm;
    eo.sp = spec.layout.sp;
    eo.distribute_saved = spec.layout.distribute_saved_activations;
    if (pp) {
      eo.pp_comm = spec.pp_comm;
      eo.tie_comm = spec.tie_comm;
      eo.micro_batches = stages.micro_batches;
      eo.first_block = stages.stage_first_block(micro, stage);
      eo.model_blocks = micro.layers;
    }
    const std::size_t nact = spec.schedule.actions.size();
    int cur = 0;
    eo.on_action = [&](std::size_t done, std::size_t all) {
      if (cb.progress)
        cb.progress((cur + static_cast<double>(done) / static_cast<double>(std::max<std::size_t>(all, 1))) / total,
                    "step " + std::to_string(cur + 1) + "/" + std::to_string(total));
    };
    (void)nact;
    Executor ex(state, backend, alloc, profiler, eo, graph);
    part_done("executor", clock.now_ns());
    std::vector<std::int32_t> tok, tgt;
    for (cur = 0; cur < total; ++cur) {
      const bool counted = cur >= spec.warmup, last = cur == total - 1;
      replica_batch(corpus, spec.seed, cur, spec.model, spec.comm, tok, tgt);
      if (!spec.dump_batch_path.empty()) append_window(dumped, tok, tgt, spec.model.seq);
      std::int64_t t0 = clock.now_ns();
      if (cur == 0) {
        part_done("batch", t0);
        tr.startup_ms = static_cast<double>(t0 - run_start) / 1e6;
      }
      ex.keep_routing(last);  // the last step's is the one the trace keeps
      StepOutput out = ex.run_step(spec.schedule, cur, tok, tgt);
      std::int64_t t1 = clock.now_ns();
      std::vector<OpRecord> ops = profiler ? profiler->collect() : std::vector<OpRecord>{};
      if (backend.asynchronous()) retime_events(alloc.mutable_events(), out.first_event, ops);
      StepStats s;
      s.step = cur;
      s.counted = counted;
      s.loss = out.loss;
      s.time_ms = static_cast<double>(t1 - t0) / 1e6;
      s.peak_bytes = alloc.peak_device();
      s.reserved_bytes = alloc.events().empty() ? 0 : alloc.events()[alloc.peak_event()].reserved;
      s.start_ns = t0;
      s.end_ns = t1;
      tr.step_stats.push_back(s);
      if (counted && s.peak_bytes >= tr.peak_bytes) {
        tr.peak_bytes = s.peak_bytes;
        tr.peak_reserved_bytes = s.reserved_bytes;
        tr.peak_tensors = tensors_at(alloc, alloc.peak_event(), 12);
      }
      if (last) {
        time_schedule(out.schedule, ops);
        time_ledger(out.ledger, alloc.events(), out.first_event);
        tr.ops = std::move(ops);
        tr.schedule_records = std::move(out.schedule);
        tr.ledger = std::move(out.ledger);
        tr.routing = std::move(out.routing);  // pipeline schedules may run micro-batches out of order
        std::stable_sort(tr.routing.begin(), tr.routing.end(), [](const RoutingRecord& x, const RoutingRecord& y) {
          return std::tie(x.micro_batch, x.layer, x.expert) < std::tie(y.micro_batch, y.layer, y.expert);
        });
        tr.step_first_event = out.first_event;
        tr.step_end_event = out.end_event;
        tr.step_start_ns = t0;
        tr.step_end_ns = t1;
        if (backend.asynchronous() && !tr.ops.empty()) {
          tr.step_start_ns = std::min(t0, tr.ops.front().start_ns);
          for (const auto& r : tr.ops) tr.step_end_ns = std::max(tr.step_end_ns, r.end_ns);
        }
        tr.saved_bytes_per_block = out.saved_bytes_per_block;
        tr.host_bytes_per_block = out.host_bytes_per_block;
        tr.flops = {out.flops_forward, out.flops_recompute, out.flops_backward, out.flops_other};
        tr.block_forwards = out.block_forwards;
        tr.activation_peak_bytes = activation_peak(alloc.events(), out.first_event);
        tr.grad_checksum = state.grad_checksum();
      }
      if (!std::isfinite(out.loss))
        throw Error("training diverged: the loss of step " + std::to_string(cur) + " is " +
                    (std::isnan(out.loss) ? "NaN" : "infinite") +
                    " (a lower --lr, or weights without NaN or infinity, may help)");
    }
    if (profiler) tr.profiler_overhead_ns = profiler->overhead_ns();
    // Every rank of the job meets in the gathers; rank 0 writes (rank_weights.h).
    const bool first = replica_of(spec.comm) == 0 && place.t == 0;
    if (!spec.grads_out.empty()) {
      if (pieces) save_rank_file(spec.grads_out, state, spec.model, place, true, spec.shard_bytes, inputs, "--save-grads");
      else if (first)
        write_weights(spec.grads_out, state.read_grads(), state.layout(), spec.shard_bytes, inputs, "--save-grads");
    }
    if (!spec.weights_out.empty()) {
      if (pieces)
        save_rank_file(spec.weights_out, state, spec.model, place, false, spec.shard_bytes, inputs, "--save-weights");
      else if (first)
        write_weights(spec.weights_out, state.read_params(), state.layout(), spec.shard_bytes, inputs, "--save-weights");
    }
    if (cb.progress) cb.progress(1.0, "done");
  } catch (const Cancelled& e) {
    tr.complete = false;
    tr.status = "cancelled";
    tr.error = e.what();
  } catch (const OutOfMemoryError& e) {
    tr.complete = false;
    tr.status = "out_of_memory";
    tr.error = std::string(e.what()) + " (predicted peak " + std::to_string(pred.peak_bytes) +
               " bytes, " + std::to_string(e.available()) + " available)";
  } catch (const ScheduleError&) {
    throw;
  } catch (const Error& e) {
    tr.complete = false;
    tr.status = "error";
    tr.error = e.what();
  }
  // The batches of every step that ran, also when the run stopped early. A file that cannot be
  // written (a full disk) makes the run an error, with what it measured kept.
  if (!spec.dump_batch_path.empty() && !dumped.empty()) {
    try {
      dump_batches(spec.dump_batch_path, dumped, spec.model, inputs);
    } catch (const Error& e) {
      tr.complete = false;
      tr.error = tr.status == "ok" ? e.what() : tr.error + "; " + e.what();
      tr.status = tr.status == "ok" ? "error" : tr.status;
    }
  }
  tr.events = alloc.events();
  tr.names = alloc.names();
  return tr;
}

}  // namespace remat
