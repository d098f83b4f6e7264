// Step flow and everything outside the blocks: embedding, head and loss, optimizer, memory.
#include "core/engine/executor.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/backend/moe_aux.h"
#include "core/engine/data_parallel.h"
#include "core/engine/ledger_why.h"
#include "core/engine/tensor_parallel.h"
#include "core/util/error.h"

namespace remat {

namespace {
// The block index of the embedding's dropout mask key: outside every block, on every stage.
constexpr int kEmbeddingMaskBlock = 0xFFFF;
}  // namespace

Executor::Executor(ModelState& state, Backend& backend, TrackingAllocator& alloc,
                   Profiler* profiler, ExecOptions options)
    : Executor(state, backend, alloc, profiler, std::move(options), BlockGraph(state.config())) {}

Executor::Executor(ModelState& state, Backend& backend, TrackingAllocator& alloc,
                   Profiler* profiler, ExecOptions options, BlockGraph graph)
    : st_(state),
      be_(backend),
      alloc_(alloc),
      prof_(profiler),
      opt_(std::move(options)),
      cfg_(state.config()),
      graph_(std::move(graph)),
      segments_(state.adam_segments()) {
  if (graph_.config().layers != cfg_.layers)
    throw Error("the block table is for " + std::to_string(graph_.config().layers) +
                " blocks, the model has " + std::to_string(cfg_.layers));
  if (opt_.comm) check_data_parallel(cfg_, be_, *opt_.comm);
  full_cfg_ = cfg_;
  if (opt_.tp_comm && opt_.tp_comm->size() > 1) {
    tp_ = opt_.tp_comm->size();
    tp_rank_ = opt_.tp_comm->rank();
    sp_ = opt_.sp;
    check_data_parallel(cfg_, be_, *opt_.tp_comm);
    for (int i = 0; i < graph_.table_count(); ++i) regions_.push_back(block_regions(graph_.table(i)));
    full_cfg_.heads = cfg_.heads * tp_;
    full_cfg_.kv_heads = cfg_.kv_heads * tp_;
    full_cfg_.ffn = cfg_.ffn * tp_;
    distribute_ = opt_.distribute_saved;
    if (distribute_ && sp_)
      throw Error("distributed checkpoints cannot be combined with sequence parallelism (the inputs are already split)");
  }
  first_block_ = opt_.first_block;  // a stage's (also one micro-batch of it simulated alone)
  if (opt_.pp_comm && opt_.pp_comm->size() > 1) {
    pp_ = opt_.pp_comm->size();
    stage_ = opt_.pp_comm->rank();
    micros_ = std::max(1, opt_.micro_batches);
    check_data_parallel(cfg_, be_, *opt_.pp_comm);
  }
  // A stage's load-balancing buffer holds the whole model's MoE layers (every stage sizes it the
  // same); one process's, and a stage's micro-batch simulated alone, its own blocks'.
  model_blocks_ = pp_ > 1 ? opt_.model_blocks : first_block_ + cfg_.layers;
  if (model_blocks_ < first_block_ + cfg_.layers)
    throw Error("internal: pipeline stage " + std::to_string(stage_) + " of blocks [" + std::to_string(first_block_) +
                ", " + std::to_string(first_block_ + cfg_.layers) + ") in a model of " + std::to_string(model_blocks_) +
                " blocks (ExecOptions::model_blocks)");
  setup_zero();
  if (cfg_.position == PositionKind::Rope) {
    rope_ = rope_frequencies(cfg_.rope_scaling, cfg_.rope_theta, cfg_.rotary_dim(), cfg_.positions, cfg_.seq);
    // A table per base of this rank's blocks that have their own (rope_table picks it).
    for (int b = 0; b < cfg_.layers; ++b) {
      const double base = cfg_.rope_base_of(first_block_ + b);
      if (base > 0.0 && std::none_of(rope_bases_.begin(), rope_bases_.end(), [base](const auto& r) { return r.first == base; }))
        rope_bases_.emplace_back(base, rope_frequencies(RopeScaling{}, base, cfg_.rotary_dim(), cfg_.positions, cfg_.seq));
    }
  }
}

Executor::~Executor() = default;

void Executor::op(const std::string& name, const std::string& kind, int block,
                  std::uint64_t flops, std::uint64_t bytes, Stream stream,
                  const std::function<void()>& body) {
  if (opt_.cancel && opt_.cancel->load(std::memory_order_relaxed)) throw Cancelled();
  OpInfo info;
  info.op_id = next_op_++;
  info.name = name;
  info.op = kind;
  info.block = block;
  info.phase = phase_;
  info.step = step_;
  info.flops = flops;
  info.bytes = bytes;
  info.stream = stream;
  alloc_.set_op_seq(info.op_id);
  if (prof_) prof_->begin_op(info);
  body();
  if (prof_) prof_->end_op(info);
  alloc_.set_op_seq(next_op_);
  switch (phase_) {
    case Phase::Forward: out_->flops_forward += flops; break;
    case Phase::Recompute: out_->flops_recompute += flops; break;
    case Phase::Backward: out_->flops_backward += flops; break;
    default: out_->flops_other += flops; break;
  }
}

void Executor::collective(const std::string& name, const std::string& kind, int block,
                          std::uint64_t bytes, const std::function<void()>& body) {
  op(name, kind, block, 0, bytes, Stream::Comm, [&] {
    be_.synchronize();
    body();
  });
}

void Executor::collective_f32(const std::string& name, const std::string& kind, int block, const Tensor& t,
                              const std::function<void(float*)>& body) {
  if (t.dtype == DType::F32) return collective(name, kind, block, t.bytes(), [&] { body(t.as<float>()); });
  Tensor f = alloc_outer(DType::F32, t.numel, Category::Workspace, name + ".f32", block);
  op(name + ".to_f32", "cast", block, 0, t.bytes() + f.bytes(), Stream::Compute, [&] { be_.cast(f, t); });
  collective(name, kind, block, f.bytes(), [&] { body(f.as<float>()); });
  op(name + ".from_f32", "cast", block, 0, t.bytes() + f.bytes(), Stream::Compute, [&] { be_.cast(t, f); });
  release(f);
}

void Executor::gather_v(const std::string& name, int block, const Tensor& t, const std::vector<std::size_t>& counts,
                        Communicator& c, const std::string& what) {
  collective(name, "all_gather", block, t.bytes(), [&] {
    if (t.dtype == DType::F32) c.all_gather_v(t.as<float>(), counts, what);
    else c.all_gather_v(t.as<std::uint16_t>(), counts, what);
  });
}

DropoutKey Executor::key(int block, DropoutSite site) const {
  // A block's masks by its index in the whole model; micro-batch k of replica r is micro-batch
  // r·N + k of the global batch (every mask is batch-major).
  const int global = block == kEmbeddingMaskBlock ? block : block + first_block_;
  const DropoutKey k{opt_.seed, static_cast<std::uint32_t>(step_),
                     static_cast<std::uint32_t>(global), static_cast<std::uint32_t>(site),
                     dropout_offset(full_cfg_, site, replica_of(opt_.comm) * micros_ + micro_)};
  // The embedding's mask is outside the blocks: whole on every tensor-parallel rank.
  if (site == kSiteEmbedding) return k;
  return tp_dropout_key(k, full_cfg_, site, tp_, tp_rank_, sp_);
}

AttnDims Executor::attn(int block) const {
  AttnDims a;
  a.B = cfg_.batch;
  a.S = cfg_.seq;
  a.heads = cfg_.heads;
  a.kv_heads = cfg_.kv_heads;
  a.d = cfg_.head_dim();
  a.dv = cfg_.mla.on() ? cfg_.v_head_dim() : 0;
  a.scale = cfg_.attn_scale > 0.0 ? static_cast<float>(cfg_.attn_scale)
                                  : 1.0f / std::sqrt(static_cast<float>(a.d));
  if (cfg_.attn_scale_inverse_layer) a.scale /= static_cast<float>(first_block_ + block + 1);
  a.window = cfg_.window_of(first_block_ + block);
  a.chunk = cfg_.chunk_of(first_block_ + block);
  a.softcap = static_cast<float>(cfg_.attn_softcap);
  return a;
}

RopeTable Executor::rope_table(int block) const {
  RopeTable r;
  const double base = cfg_.rope_base_of(first_block_ + block);
  const RopeFrequencies* own = nullptr;
  for (const auto& [b, table] : rope_bases_)
    if (b == base) own = &table;
  const RopeFrequencies& f = own != nullptr ? *own : rope_;
  if (!cfg_.rope_in(first_block_ + block) && cfg_.attn_temperature_floor > 0) {  // temperature tuning only
    r.temp_floor = cfg_.attn_temperature_floor;
    r.temp_scale = static_cast<float>(cfg_.attn_temperature_scale);
    return r;
  }
  if (f.inv_freq.empty()) return r;
  r.inv_freq = f.inv_freq.data();
  r.rotary_dim = 2 * static_cast<int>(f.inv_freq.size());
  r.attention_scaling = f.attention_scaling;
  r.interleaved = cfg_.rope_interleaved;
  return r;
}

Tensor Executor::alloc_outer(DType dt, std::int64_t n, Category c, const std::string& name,
                             int block) {
  return alloc_.allocate(dt, n, {c, block, name});
}

void Executor::release(Tensor& t) {
  if (t.id) alloc_.free(t);
}

StepOutput Executor::run_step(const Schedule& s, int step, const std::vector<std::int32_t>& tokens,
                              const std::vector<std::int32_t>& targets) {
  if (pp_ > 1) return run_pipeline_step(s, step, tokens, targets);
  validate_schedule(s, graph_);  // nothing runs for an illegal schedule
  // The schedule's rules as the actions run: what each action does comes from here.
  ScheduleState state(graph_, s);
  // The simulator's backend reads no tokens: it may hand none (a batch of 2^24 sequences would
  // otherwise be gigabytes of zeros on the host).
  const bool no_data = !be_.computes() && tokens.empty() && targets.empty();
  if (!no_data && (static_cast<std::int64_t>(tokens.size()) != cfg_.tokens() ||
                   static_cast<std::int64_t>(targets.size()) != cfg_.tokens()))
    throw Error("batch has " + std::to_string(tokens.size()) + " tokens, the model needs " +
                std::to_string(cfg_.tokens()));
  StepOutput out;
  begin_step(step, out);
  blocks_.assign(static_cast<std::size_t>(cfg_.layers), BlockMemory{});
  for (int b = 0; b < cfg_.layers; ++b) blocks_[static_cast<std::size_t>(b)].held.resize(table_of(b).tensors().size());

  try {
    if (aux_on())
      aux_ = alloc_outer(DType::F32, MoeAuxLayout{aux_layers(), cfg_.moe.experts}.size(), Category::LogitsLoss,
                         "moe.aux");
    op("batch", "batch", -1, 0, 8ull * cfg_.tokens(), Stream::Compute, [&] {
      be_.write_bytes(st_.tokens, tokens.data());
      be_.write_bytes(st_.targets, targets.data());
      be_.fill_zero(st_.grads);
      if (aux_) be_.fill_zero(aux_);
    });
    embedding_forward();
    for (std::size_t i = 0; i < s.actions.size(); ++i) run_action(state, s, i, out);
    embedding_backward();
    sync_tensor_parallel_gradients();
    sync_gradients();
    optimizer();
    be_.synchronize();
    out.loss = global_mean(opt_.comm, read_mean_loss());
  } catch (...) {
    release_step_buffers();
    throw;
  }
  return end_step(out);
}

void Executor::begin_step(int step, StepOutput& out) {
  out_ = &out;
  step_ = step;
  phase_ = Phase::Forward;
  saw_backward_ = false;
  ledger_.clear();
  alloc_.set_step(step);
  alloc_.set_phase(Phase::Forward);
  alloc_.reset_peak();
  out.first_event = alloc_.events().size();
}

StepOutput& Executor::end_step(StepOutput& out) {
  finish_ledger(out);
  out.end_event = alloc_.events().size();
  if (alloc_.poison()) alloc_.release_quarantine();
  out_ = nullptr;
  return out;
}

void Executor::release_step_buffers() {
  // Leave the allocator balanced so a caller can save what was traced and go on.
  be_.synchronize();
  for (auto& b : blocks_)
    for (auto& h : b.held) release(h.t);
  for (Tensor* t : {&final_in_, &embed_mask_, &losses_, &dnext_, &aux_}) release(*t);
  zero_release_gathered();
  for (ZeroLive& g : buckets_) release(g.t);
  buckets_.clear();
  for (Tensor& t : sending_) release(t);
  sending_.clear();
  out_ = nullptr;
}

double Executor::read_mean_loss(bool keep_aux) {
  if (!be_.computes()) {  // the simulator: no values, and no host copy of the per-row losses
    release(losses_);
    if (!keep_aux) release(aux_);
    return 0.0;
  }
  std::vector<float> losses;
  be_.read(losses_, losses);
  double sum = 0.0;
  for (float l : losses) sum += l;
  release(losses_);
  double aux = 0.0;  // the load-balancing loss, times its coefficient
  if (aux_) {
    std::vector<float> buf;
    be_.read(aux_, buf);
    aux = buf.at(static_cast<std::size_t>(MoeAuxLayout{aux_layers(), cfg_.moe.experts}.loss()));
    if (!keep_aux) release(aux_);
  }
  return (losses.empty() ? 0.0 : sum / static_cast<double>(losses.size())) + aux;
}

void Executor::run_action(ScheduleState& state, const Schedule& s, std::size_t i, StepOutput& out) {
  const Action& a = s.actions[i];
  const ActionEffect e = state.apply(i, a);
  ScheduleRecord rec;
  rec.index = i;
  rec.action = to_string(a.kind);
  rec.block = a.block;
  rec.keep = (a.kind == ActionKind::Forward || a.kind == ActionKind::Recompute || needs_version2(a))
                 ? a.keep.to_string() : "";
  rec.step = step_;
  std::uint64_t first_op = next_op_;
  // What each block holds when the forward sweep is over is what it saved (a recompute or
  // prefetch just before the first backward must not count). A pipeline stage measures one
  // micro-batch's forward instead (run_pipeline_step).
  if (!saw_backward_ && starts_backward_sweep(a, e.recompute)) {
    saw_backward_ = true;
    measure_saved_bytes(out);
  }
  if (e.head_first) {
    std::uint64_t head_first = next_op_;
    if (stage_ + 1 < pp_) pipeline_receive_grad();  // the next stage's gradient
    else head();
    ScheduleRecord h = rec;
    h.action = "head";
    h.keep.clear();
    h.phase = Phase::Forward;
    h.start_ns = static_cast<std::int64_t>(head_first);
    h.end_ns = static_cast<std::int64_t>(next_op_ - 1);
    out.schedule.push_back(h);
    first_op = next_op_;
  }
  switch (a.kind) {
    case ActionKind::Forward:
    case ActionKind::Recompute:
      rec.phase = e.recompute ? Phase::Recompute : Phase::Forward;
      forward(a.block, e);
      break;
    case ActionKind::Backward:
      rec.phase = Phase::Backward;
      backward(a.block, e);
      break;
    case ActionKind::Offload:
      rec.phase = phase_;
      offload(a.block, e.targets);
      break;
    case ActionKind::Prefetch:
      rec.phase = phase_;
      prefetch(a.block, e.targets);
      break;
    case ActionKind::Drop:
      rec.phase = phase_;
      drop(a.block);
      break;
  }
  check_memory(state, i, a.block);
  if (e.produces && a.block + 1 < cfg_.layers) check_memory(state, i, a.block + 1);
  // Op ids for now; the trace turns them into times once the ops are timed.
  rec.start_ns = static_cast<std::int64_t>(first_op);
  rec.end_ns = static_cast<std::int64_t>(next_op_ - 1);
  out.schedule.push_back(rec);
  if (opt_.on_action) opt_.on_action(i + 1, s.actions.size());
}

void Executor::embedding_forward() {
  const std::int64_t n = cfg_.tokens() * cfg_.hidden;
  const int B = cfg_.batch, S = cfg_.seq, H = cfg_.hidden;
  const auto& L = st_.layout();
  if (zero_.parameters()) zero_gather(zero_embed_, -1);
  Tensor wte = param_at(L.wte, static_cast<std::int64_t>(cfg_.vocab) * H);
  Tensor wpe = L.wpe >= 0 ? param_at(L.wpe, static_cast<std::int64_t>(cfg_.positions) * H) : Tensor{};
  const float scale = cfg_.embed_multiplier();
  Held& in0 = blocks_[0].held[table_of(0).input()];
  in0.t = alloc(table_of(0).input(), 0, Category::SavedActivations);
  in0.category = Category::SavedActivations;
  ledger_.push_back({0, table_of(0).input(), in0.t.bytes(), in0.t.id, in0.t.id, Phase::Forward,
                     Category::SavedActivations});
  in0.ledger = static_cast<int>(ledger_.size()) - 1;
  // With sequence parallelism the embedding is made whole and each rank keeps its rows, then
  // drops out its rows only, as Megatron-LM does (the mask is the rank's s/T of the sequence;
  // its bits are the whole mask's at the same places).
  const bool drops = cfg_.drops(kDropEmbedding);
  Tensor whole = sp_ || drops ? alloc_outer(cfg_.dtype, n, sp_ ? Category::Workspace : Category::SavedActivations,
                                            sp_ ? "embed.out" : "embed.sum")
                              : in0.t;
  op("embedding", "embedding", -1, static_cast<std::uint64_t>(n), 3ull * whole.bytes(),
     Stream::Compute, [&] { be_.embedding_fwd(st_.tokens, wte, wpe ? &wpe : nullptr, whole, B, S, H, scale); });
  const std::int64_t mine = in0.t.numel;
  Tensor rows = sp_ ? whole.slice(mine * tp_rank_, mine) : whole;
  if (sp_ && !drops)
    op("embedding.scatter", "copy", -1, 0, 2 * in0.t.bytes(), Stream::Compute, [&] { be_.copy(in0.t, rows); });
  if (drops) {
    embed_mask_ = alloc_outer(DType::U8, mine, Category::SavedActivations, "embed.mask");
    DropoutKey k = key(kEmbeddingMaskBlock, kSiteEmbedding);
    if (sp_) k.offset += static_cast<std::uint64_t>(mine * tp_rank_);
    op("embedding.mask", "dropout_mask", -1, static_cast<std::uint64_t>(mine), embed_mask_.bytes(),
       Stream::Compute, [&] { be_.dropout_mask(embed_mask_, k, static_cast<float>(cfg_.dropout), mine); });
    op("embedding.dropout", "dropout", -1, 2ull * mine, 2 * in0.t.bytes() + embed_mask_.bytes(),
       Stream::Compute, [&] { be_.dropout_fwd(rows, embed_mask_, in0.t, static_cast<float>(cfg_.dropout), mine); });
  }
  if (whole.id != in0.t.id) release(whole);
  zero_release_gathered();
}

void Executor::head() {
  const std::int64_t rows = cfg_.tokens(), n = rows * cfg_.hidden;
  const int H = cfg_.hidden, V = cfg_.vocab;
  const auto& L = st_.layout();
  const float eps = static_cast<float>(cfg_.norm_eps);
  const float w_offset = cfg_.norm_unit_offset ? 1.0f : 0.0f;  // the final norm as the blocks'
  phase_ = Phase::Forward;
  alloc_.set_phase(phase_);
  aux_loss();  // every block's forward has run: every layer's routing is known
  // ZeRO-2: the gradients outside the blocks accumulate from here to the embedding's backward
  // (on a last pipeline stage, over every micro-batch to the step's end).
  if (zero_.gradients()) zero_open_bucket(zero_outer_, -1);
  if (zero_.parameters()) zero_gather(zero_head_, -1);
  Tensor w = param_at(L.lnf_w, H), dw = grad_at(L.lnf_w, H);
  Tensor b = L.lnf_b >= 0 ? param_at(L.lnf_b, H) : Tensor{};
  Tensor db = L.lnf_b >= 0 ? grad_at(L.lnf_b, H) : Tensor{};
  Tensor W = param_at(L.head_weight(), static_cast<std::int64_t>(V) * H);
  Tensor dW = grad_at(L.head_weight(), static_cast<std::int64_t>(V) * H);
  const bool ln = cfg_.norm == NormKind::LayerNorm;
  // With sequence parallelism the last block's rows are gathered: the head runs whole.
  Tensor x = sp_ ? tp_gather(-1, final_in_, "final.in.all_gather") : final_in_;
  Tensor lnf = alloc_outer(cfg_.dtype, n, Category::SavedActivations, "lnf.out");
  op("lnf", ln ? "layernorm" : "rmsnorm", -1, (ln ? 8ull : 5ull) * n, 2 * lnf.bytes(),
     Stream::Compute, [&] {
       if (ln) be_.layernorm_fwd(x, w, b, lnf, rows, H, eps);
       else be_.rmsnorm_fwd(x, w, lnf, rows, H, eps, w_offset);
     });
  losses_ = alloc_outer(DType::F32, rows, Category::LogitsLoss, "loss.rows");
  Tensor dlnf = alloc_outer(cfg_.dtype, n, Category::ActivationGrads, "grad:lnf.out");
  const std::uint64_t mm = 2ull * static_cast<std::uint64_t>(rows) * H * V;
  // The head's forward and backward run fused (the loss gradient is known), chunk by chunk.
  op("head", "head_loss", -1, 3 * mm, 2 * lnf.bytes() + 2 * W.bytes(), Stream::Compute, [&] {
    // The mean over the global batch's tokens: a replica's share of the summed gradient.
    be_.head_loss(lnf, W, st_.targets, losses_, dlnf, dW, rows, H, V,
                  1.0f / static_cast<float>(rows * micros_ * replicas_of(opt_.comm)),
                  static_cast<float>(cfg_.final_softcap), static_cast<float>(1.0 / cfg_.logits_scaling));
  });
  out_->flops_forward -= 2 * mm;  // split the fused op's FLOPs: 1/3 forward, 2/3 backward
  out_->flops_backward += 2 * mm;
  release(lnf);
  phase_ = Phase::Backward;
  alloc_.set_phase(phase_);
  dnext_ = alloc_outer(cfg_.dtype, n, Category::ActivationGrads, "grad:final.in");
  op("lnf.backward", ln ? "layernorm" : "rmsnorm", -1, (ln ? 14ull : 10ull) * n,
     3 * dlnf.bytes(), Stream::Compute, [&] {
       if (ln) be_.layernorm_bwd(x, w, dlnf, dnext_, dw, db, rows, H, eps, false);
       else be_.rmsnorm_bwd(x, w, dlnf, dnext_, dw, rows, H, eps, false, w_offset);
     });
  release(dlnf);
  zero_release_gathered();
  if (sp_) {
    release(x);
    Tensor shard = alloc_outer(cfg_.dtype, final_in_.numel, Category::ActivationGrads, "grad:final.in");
    op("lnf.backward.scatter", "copy", -1, 0, 2 * shard.bytes(), Stream::Compute,
       [&] { be_.copy(shard, dnext_.slice(shard.numel * tp_rank_, shard.numel)); });
    release(dnext_);
    dnext_ = shard;
  }
  release(final_in_);
}

void Executor::embedding_backward() {
  phase_ = Phase::Backward;
  alloc_.set_phase(phase_);
  const std::int64_t n = cfg_.tokens() * cfg_.hidden;
  const int B = cfg_.batch, S = cfg_.seq, H = cfg_.hidden;
  const auto& L = st_.layout();
  // ZeRO-2: open since the head in one process; a first pipeline stage opens it at its first
  // micro-batch's embedding backward and keeps it to the step's end (run_pipeline_step).
  if (zero_.gradients()) zero_open_bucket(zero_outer_, -1);
  Tensor dwte = grad_at(L.wte, static_cast<std::int64_t>(cfg_.vocab) * H);
  Tensor dwpe = L.wpe >= 0 ? grad_at(L.wpe, static_cast<std::int64_t>(cfg_.positions) * H) : Tensor{};
  if (cfg_.drops(kDropEmbedding)) {  // the rank's rows (all of them without sp)
    const std::int64_t mine = dnext_.numel;
    Tensor tmp = alloc_outer(cfg_.dtype, mine, Category::ActivationGrads, "grad:embed.sum");
    op("embedding.dropout.backward", "dropout", -1, 2ull * mine, 2 * tmp.bytes(), Stream::Compute,
       [&] { be_.dropout_bwd(dnext_, embed_mask_, tmp, static_cast<float>(cfg_.dropout), mine, false); });
    release(embed_mask_);
    release(dnext_);
    dnext_ = tmp;
  }
  if (sp_) {  // the rows of every rank, for the embedding's whole gradient
    Tensor whole = tp_gather(-1, dnext_, "grad:embed.all_gather");
    release(dnext_);
    dnext_ = whole;
  }
  op("embedding.backward", "embedding", -1, static_cast<std::uint64_t>(n), 3ull * dnext_.bytes(),
     Stream::Compute, [&] { be_.embedding_bwd(st_.tokens, dnext_, dwte, dwpe ? &dwpe : nullptr, B, S, H, cfg_.embed_multiplier()); });
  release(dnext_);
  if (zero_.gradients() && pp_ == 1) zero_close_bucket(-1);
}

void Executor::sync_gradients() {
  if (replicas_of(opt_.comm) == 1 || zero_.gradients()) return;  // ZeRO-2: summed per bucket
  collective_f32("grads.all_reduce", "all_reduce", -1, st_.grads, [&](float* g) {
    opt_.comm->all_reduce_sum(g, static_cast<std::size_t>(st_.grads.numel), "grads");
  });
}

void Executor::optimizer() {
  phase_ = Phase::Optimizer;
  alloc_.set_phase(phase_);
  AdamArgs a = opt_.adam;
  a.t = step_ + 1;
  a.zero_moments = st_.moments_zero;
  st_.moments_zero = false;
  if (zero_.optimizer()) return zero_optimizer(a);
  const std::uint64_t n = static_cast<std::uint64_t>(st_.layout().total());
  op("adamw", "adamw", -1, 12 * n, st_.static_bytes() * 2, Stream::Compute, [&] {
    be_.adamw(st_.params, st_.grads, st_.master.id ? &st_.master : nullptr, st_.m, st_.v,
              segments_, a);
  });
}

void Executor::measure_saved_bytes(StepOutput& out) const {
  // From the allocator's events of this step: device and host bytes per block.
  out.saved_bytes_per_block.assign(static_cast<std::size_t>(cfg_.layers), 0);
  out.host_bytes_per_block.assign(static_cast<std::size_t>(cfg_.layers), 0);
  std::vector<std::int64_t> dev(static_cast<std::size_t>(cfg_.layers), 0), host(dev);
  const auto& ev = alloc_.events();
  for (std::size_t i = out.first_event; i < ev.size(); ++i) {
    const MemoryEvent& e = ev[i];
    if (e.block < 0 || e.block >= cfg_.layers) continue;
    if (e.space == Space::Device && is_activation(e.category)) dev[e.block] += e.delta;
    if (e.space == Space::Host) host[e.block] += e.delta;
  }
  for (int b = 0; b < cfg_.layers; ++b) {
    out.saved_bytes_per_block[b] = static_cast<std::uint64_t>(std::max<std::int64_t>(0, dev[b]));
    out.host_bytes_per_block[b] = static_cast<std::uint64_t>(std::max<std::int64_t>(0, host[b]));
  }
}

std::uint64_t Executor::live_activation_bytes(const StepOutput& out) const {
  std::int64_t live = 0;
  const auto& ev = alloc_.events();
  for (std::size_t i = out.first_event; i < ev.size(); ++i)
    if (ev[i].space == Space::Device && is_activation(ev[i].category)) live += ev[i].delta;
  return static_cast<std::uint64_t>(std::max<std::int64_t>(0, live));
}

void Executor::finish_ledger(StepOutput& out) {
  // Per block, the tensors it held from its forward to its backward: what the reasons weigh.
  std::map<int, std::vector<bool>> held;
  for (const auto& l : ledger_) {
    std::vector<bool>& h = held[l.block];
    if (h.empty()) h.assign(table_of(l.block).tensors().size(), false);
    if (l.created != Phase::Forward) continue;
    if (!l.decision.empty() && l.decision != "kept" && l.decision != "checkpoint" && l.decision != "offloaded") continue;
    h[static_cast<std::size_t>(l.tensor)] = true;
  }
  for (const auto& l : ledger_) {
    LedgerEntry e;
    e.block = l.block;
    e.tensor = table_of(l.block).tensors()[l.tensor].name;
    e.bytes = l.bytes;
    e.created = l.created;
    e.category = l.category;
    e.decision = l.decision.empty() ? "kept" : l.decision;
    e.alloc_id = l.first_id;
    e.free_id = l.last_id;
    e.why = ledger_why(table_of(l.block), l.block, held.at(l.block), l.tensor, e.decision);
    out.ledger.push_back(std::move(e));
  }
}

}  // namespace remat
