// Interprets a schedule on a backend for one training step: embedding, the block actions,
// the fused head and loss before the first backward, the embedding's backward and AdamW.
// Every tensor comes from the tracking allocator, sized by the block table. With the null
// backend the same walk is the simulator.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/backend/backend.h"
#include "core/dist/communicator.h"
#include "core/engine/model_state.h"
#include "core/engine/zero_shard.h"
#include "core/graph/block_graph.h"
#include "core/graph/parallel_layout.h"
#include "core/memory/tracking_allocator.h"
#include "core/profiler/profiler.h"
#include "core/schedule/block_state.h"
#include "core/schedule/schedule.h"
#include "core/schedule/validator.h"
#include "core/trace/records.h"

namespace remat {

struct ExecOptions {
  std::uint64_t seed = 0;
  AdamArgs adam;
  const std::atomic<bool>* cancel = nullptr;  // checked between ops
  // Called after every action with (actions done, actions in all).
  std::function<void(std::size_t, std::size_t)> on_action;
  // Data parallelism (data_parallel.h): this replica's place and the gradients' sum over the
  // replicas; none: one replica.
  Communicator* comm = nullptr;
  // Tensor parallelism (tensor_parallel.h): this rank's place among the T ranks that split every
  // block, and the exchanges around its linears; the executor's graph is then the per-rank
  // block table and the state a rank's model (tensor_rank_model). With `sp` the sequence region
  // is split over them too. None: one rank.
  Communicator* tp_comm = nullptr;
  bool sp = false;
  // With tp_comm and without sp (Megatron's --distribute-saved-activations): a block input kept
  // as the checkpoint of a recomputed block is held as this rank's 1/T of it, all-gathered
  // before the block's recompute.
  bool distribute_saved = false;
  // Pipeline stages (executor_pipeline.cpp): the P stages of this replica and tensor slice
  // (`pp_comm`, whose rank is the stage), the micro-batches of a step, the whole model's index
  // of the stage's first block and, with a tied embedding, the group of the first and the last
  // stage (their two copies' gradients are summed before AdamW). The state holds the stage's
  // parameters (LayoutParts), its model the stage's blocks and one micro-batch; run_step then
  // takes the replica's batch (micro_batches × the model's tokens). None: one stage.
  // model_blocks: the whole model's blocks (needed with stages: a load-balancing loss's buffer
  // holds every MoE layer of the model).
  Communicator* pp_comm = nullptr;
  Communicator* tie_comm = nullptr;
  int micro_batches = 1;
  int first_block = 0;
  int model_blocks = 0;
};

// What one step did, counted from what ran (not from the plan).
struct StepOutput {
  double loss = 0.0;
  std::uint64_t block_forwards = 0;
  std::uint64_t flops_forward = 0, flops_recompute = 0, flops_backward = 0, flops_other = 0;
  std::vector<std::uint64_t> saved_bytes_per_block;  // device bytes per block after the forward sweep
  std::vector<std::uint64_t> host_bytes_per_block;   // offloaded bytes per block at the same point
  // A pipeline stage: the device activation bytes its first micro-batch holds from the end of
  // its forward until its backward (its blocks' and what outside them it keeps: the embedding's
  // dropout mask); 0 otherwise.
  std::uint64_t held_after_forward = 0;
  std::vector<ScheduleRecord> schedule;
  std::vector<LedgerEntry> ledger;  // times left 0: the caller times them from the events
                                    // once they are on their final axis (run.cpp)
  // Each MoE layer's routing of each micro-batch, from its first forward (not its recomputes).
  std::vector<RoutingRecord> routing;
  std::vector<OpRecord> ops;                         // filled by the caller from the profiler
  std::size_t first_event = 0, end_event = 0;        // this step's memory events [first, end)
};

class Executor {
 public:
  Executor(ModelState& state, Backend& backend, TrackingAllocator& alloc, Profiler* profiler,
           ExecOptions options);
  // Interprets `graph` instead of the model's own block table; its model must be the state's.
  Executor(ModelState& state, Backend& backend, TrackingAllocator& alloc, Profiler* profiler,
           ExecOptions options, BlockGraph graph);
  ~Executor();

  const BlockGraph& graph() const { return graph_; }
  // Whether the next steps record each MoE layer's routing (StepOutput::routing): a host copy of
  // the routing table per layer and micro-batch, which on CUDA waits for the device. Off until set.
  void keep_routing(bool on) { keep_routing_ = on; }
  // Validates first (throws ScheduleError); tokens and targets have B*S entries.
  StepOutput run_step(const Schedule& s, int step, const std::vector<std::int32_t>& tokens,
                      const std::vector<std::int32_t>& targets);

 private:
  struct Held {
    Tensor t;
    bool on_host = false;
    Category category = Category::SavedActivations;  // on the device
    int ledger = -1;
  };
  // A block's tensors in memory; what the block holds by the schedule's rules is the
  // ScheduleState's, and the two are checked against each other after every action.
  struct BlockMemory {
    std::vector<Held> held;  // by tensor index
    bool pending_copy = false;
    std::uint64_t split_input = 0;  // the held input's id while it is this rank's 1/T (distribute_saved)
  };
  struct Ledger {
    int block;
    int tensor;
    std::uint64_t bytes;
    std::uint64_t first_id = 0, last_id = 0;
    Phase created = Phase::Forward;
    Category category = Category::SavedActivations;
    bool offloaded = false;
    std::string decision;
  };

  // actions
  void forward(int b, const ActionEffect& e);  // forward or recompute, as the state decided
  void backward(int b, const ActionEffect& e);  // with e.inner's rebuilds
  // Rebuilds r.targets of block b inside its backward into bs.held and `cur`.
  void recompute_inside(int b, const InnerRecompute& r, std::vector<Tensor>& cur);
  void offload(int b, const TensorSet& which);
  void prefetch(int b, const TensorSet& which);
  void drop(int b);
  void head();
  void embedding_forward();
  void embedding_backward();
  void sync_gradients();
  void optimizer();
  // One schedule action (run_step's loop body, shared with the pipeline's micro-batches).
  void run_action(ScheduleState& state, const Schedule& s, std::size_t i, StepOutput& out);
  // What every step does first (the step's state, the allocator's step and peak) and last (the
  // ledger, the events); after a failure, every buffer the step still holds released.
  void begin_step(int step, StepOutput& out);
  StepOutput& end_step(StepOutput& out);
  void release_step_buffers();
  // The mean of the losses_ the head wrote plus the load-balancing loss in aux_ (both released
  // after, aux_ kept with keep_aux).
  double read_mean_loss(bool keep_aux = false);
  // pipeline stages (executor_pipeline.cpp)
  StepOutput run_pipeline_step(const Schedule& s, int step, const std::vector<std::int32_t>& tokens,
                               const std::vector<std::int32_t>& targets);
  void pipeline_receive_grad();  // at a later stage's first backward, instead of the head
  // Sends t (and *aux after it, where given and held) in one op; both are freed once sent.
  void pipeline_send(Tensor& t, int peer, const std::string& name, Tensor* aux = nullptr);
  // Receives t (and, where given, `aux` after it, posted together: Communicator::RecvPart).
  void pipeline_recv(const Tensor& t, int peer, const std::string& name, const Tensor& aux = Tensor{});
  void pipeline_finish_sends();
  void sync_tied_embedding();
  // tensor parallelism (executor_tp.cpp)
  void tp_linear_forward(int b, const StepDef& s, const std::vector<Tensor>& t);
  void tp_linear_backward(int b, const StepDef& s, const std::vector<Tensor>& t,
                          const std::vector<Tensor>& g, const std::vector<bool>& acc);
  void tp_qk_norm_forward(int b, const StepDef& s, const std::vector<Tensor>& t);
  void tp_qk_norm_backward(int b, const StepDef& s, const std::vector<Tensor>& t,
                           const std::vector<Tensor>& g, const std::vector<bool>& acc);
  // The T shards of `shard` gathered into a new buffer of T times its elements (freed by the caller).
  Tensor tp_gather(int block, const Tensor& shard, const std::string& name);
  // `full` summed over the T ranks; this rank's part written to (or, with acc, added into) `shard`.
  void tp_reduce_scatter(int block, Tensor& full, const Tensor& shard, bool acc, const std::string& name);
  void tp_all_reduce(int block, const Tensor& t, const std::string& name);
  // distribute_saved: block b's checkpointed input cut to this rank's 1/T, and made whole
  // again (an all-gather over T) before the block next runs.
  void split_checkpoint(int b);
  void gather_checkpoint(int b);
  // With sp: the gradients of the sequence region's parameters, each rank's from its rows only.
  void sync_tensor_parallel_gradients();
  void sync_tensor_parallel_gradients(int block);

  // ZeRO (executor_zero.cpp): the parameters and gradients the ops read and write, in the
  // state's buffers or, where the stage shards them, in the gathered buffers and open buckets.
  void setup_zero();
  Tensor param_at(std::int64_t offset, std::int64_t numel) const;
  Tensor grad_at(std::int64_t offset, std::int64_t numel) const;
  Tensor param_at(int block, const std::string& local) const;  // "" or absent: an empty tensor
  Tensor grad_at(int block, const std::string& local) const;
  // Stage 3: `bucket`'s parameters gathered from the ranks' shards into a new buffer.
  void zero_gather(const ZeroBucket& bucket, int block);
  void zero_release_gathered();
  // Stage 2: a zeroed gradient bucket; closing reduce-scatters it into the gradient shard.
  void zero_open_bucket(const ZeroBucket& bucket, int block);
  void zero_close_bucket(int block);  // the open bucket of `block` (-1: outside the blocks)
  void zero_optimizer(const AdamArgs& a);

  // ops
  void op(const std::string& name, const std::string& kind, int block, std::uint64_t flops,
          std::uint64_t bytes, Stream stream, const std::function<void()>& body);
  // A collective (gradient sums, shards, tensor- and sequence-parallel exchanges) as an op of
  // kind `kind` moving `bytes`: every one goes through here, so they share one row of the trace.
  void collective(const std::string& name, const std::string& kind, int block, std::uint64_t bytes,
                  const std::function<void()>& body);
  // A summing collective over t's elements as fp32 (the communicators sum fp32): t itself when
  // it is fp32; else a tracked fp32 copy (ops NAME.to_f32 and NAME.from_f32 around it), so a
  // bf16 sum is taken in fp32 and rounded once.
  void collective_f32(const std::string& name, const std::string& kind, int block, const Tensor& t,
                      const std::function<void(float*)>& body);
  // An all-gather of variable counts over t, which moves its elements as they are (fp32, or the
  // bits of a 16-bit dtype): nothing is summed, so no copy is needed.
  void gather_v(const std::string& name, int block, const Tensor& t, const std::vector<std::size_t>& counts,
                Communicator& c, const std::string& what);
  void run_forward_step(int b, const StepDef& s, const std::vector<Tensor>& t);
  void run_backward_step(int b, const StepDef& s, const std::vector<Tensor>& t,
                         const std::vector<Tensor>& g, const std::vector<bool>& acc);
  // An op's tensors besides its inputs and outputs: its weight, its bias, and MoeRoute's slice of
  // the load-balancing buffer.
  using OpParams = std::array<Tensor, 3>;
  OpArgs op_args(int b, const StepDef& s, const std::vector<Tensor>& t, OpParams& params) const;
  // The load-balancing loss (backend/moe_aux.h): on while the model asks for it; block b's index
  // among the MoE layers of the buffer: a pipeline stage's holds the whole model's (every
  // stage's), one process's its blocks'.
  bool aux_on() const { return cfg_.moe.on() && cfg_.moe.aux_loss_coef > 0.0 && aux_layers() > 0; }
  int aux_layer(int b) const;
  int aux_layers() const;
  void aux_loss();
  // The routing table (moe_rows.h) block b's moe.route just wrote, counted into out_->routing.
  void record_routing(int b, const Tensor& table);
  double dropout_at(DropoutSite site) const;
  DropoutKey key(int block, DropoutSite site) const;
  AttnDims attn(int block) const;
  RopeTable rope_table(int block) const;  // the block's: windowed blocks may rotate on their own base
  std::uint64_t step_bytes(int b, const StepDef& s) const;
  // Block b's table (a model's layer kinds may differ in their steps) and its regions.
  const BlockGraph& table_of(int b) const { return graph_.of(b); }
  const BlockRegions& regions(int b) const { return regions_[static_cast<std::size_t>(graph_.table_index(b))]; }

  // memory
  Tensor alloc(int tensor, int block, Category c);
  Tensor alloc_outer(DType dt, std::int64_t n, Category c, const std::string& name, int block = -1);
  void release(Tensor& t);
  void release_held(int b, int tensor, const char* decision);
  void check_memory(const ScheduleState& state, std::size_t index, int b) const;
  void measure_saved_bytes(StepOutput& out) const;
  std::uint64_t live_activation_bytes(const StepOutput& out) const;  // device, this step's
  void finish_ledger(StepOutput& out);

  ModelState& st_;
  Backend& be_;
  TrackingAllocator& alloc_;
  Profiler* prof_;
  ExecOptions opt_;
  ModelConfig cfg_;
  BlockGraph graph_;
  std::vector<AdamSegment> segments_;
  RopeFrequencies rope_;  // the model's RoPE frequencies (empty without RoPE)
  // Blocks rotating on a base of their own (ModelConfig::rope_base_of), by base, without scaling.
  std::vector<std::pair<double, RopeFrequencies>> rope_bases_;
  int tp_ = 1, tp_rank_ = 0;    // tensor-parallel ranks and this one's index
  bool sp_ = false;
  bool distribute_ = false;     // distribute_saved with T > 1
  ModelConfig full_cfg_;        // the whole model (heads, ffn) when the state is one rank's
  std::vector<BlockRegions> regions_;  // of each of the block tables, with tensor parallelism
  int pp_ = 1, stage_ = 0;      // pipeline stages and this one
  int micros_ = 1, micro_ = 0;  // micro-batches per step and the one running
  int first_block_ = 0;         // the whole model's index of the stage's block 0
  int model_blocks_ = 0;        // the whole model's blocks (with stages)
  std::vector<Tensor> sending_; // sent to a neighbouring stage, freed once the sends are done
  struct ZeroLive {
    const ZeroBucket* bucket = nullptr;
    Tensor t;
    int block = -1;
  };
  ZeroShard zero_;              // the state's (stage 0: nothing sharded)
  std::vector<ZeroBucket> zero_blocks_;          // each block's parameters
  ZeroBucket zero_outer_, zero_embed_, zero_head_;  // outside the blocks: all, embedding's, head's
  std::vector<ZeroLive> gathered_, buckets_;     // live stage-3 and stage-2 buffers

  // per step
  int step_ = 0;
  Phase phase_ = Phase::Forward;
  std::vector<BlockMemory> blocks_;
  Tensor final_in_, embed_mask_, losses_, dnext_;
  Tensor aux_;  // the micro-batch's load-balancing buffer (MoeAuxLayout), while aux_on()
  bool saw_backward_ = false;
  bool keep_routing_ = false;
  std::size_t pipeline_split_ = 0;  // a pipeline stage's forward_sweep_end of its schedule
  std::uint64_t next_op_ = 1;
  std::vector<Ledger> ledger_;
  StepOutput* out_ = nullptr;
};

}  // namespace remat
