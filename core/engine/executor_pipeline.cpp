// Pipeline stages: one step of a stage as the 1F1B order runs its micro-batches
// (pipeline_order.h). Each micro-batch has its own block memory and its own ScheduleState: the
// policy's schedule for the stage's blocks, its forward sweep (forward_sweep_end) as the
// micro-batch's forward, the rest, recomputes included, as its backward: a micro-batch waiting
// for its backward holds what its blocks saved, never a block recomputed ahead of time. The
// first stage runs the embedding, the last the head and loss; between them the last block's
// output goes to the next stage and the gradient of the first block's input to the one before,
// point to point. With a load-balancing loss, each micro-batch's buffer of every MoE layer's
// routing statistics (backend/moe_aux.h) follows the activation forward, each stage filling its
// layers', so the last stage computes the loss and its gradient over the whole model as one
// process does; the buffer, gradient included, follows the input gradient back.
#include <algorithm>
#include <memory>

#include "core/backend/moe_aux.h"
#include "core/engine/data_parallel.h"
#include "core/engine/executor.h"
#include "core/engine/pipeline_order.h"
#include "core/util/error.h"

namespace remat {

void Executor::pipeline_send(Tensor& t, int peer, const std::string& name, Tensor* aux) {
  const bool with = aux && *aux;
  collective(name, "send", -1, t.bytes() + (with ? aux->bytes() : 0), [&] {
    opt_.pp_comm->send(t.data, t.bytes(), peer, name);
    if (with) opt_.pp_comm->send(aux->data, aux->bytes(), peer, "pp.aux.send");
  });
  // Freed once the sends are done (the next receive, or the step's end).
  for (Tensor* s : {&t, with ? aux : nullptr})
    if (s) {
      sending_.push_back(*s);
      *s = Tensor{};
    }
}

void Executor::pipeline_recv(const Tensor& t, int peer, const std::string& name, const Tensor& aux) {
  std::vector<Communicator::RecvPart> parts{{t.data, t.bytes(), name}};
  if (aux) parts.push_back({aux.data, aux.bytes(), "pp.aux.recv"});
  collective(name, "recv", -1, t.bytes() + aux.bytes(), [&] { opt_.pp_comm->recv(parts, peer); });
  for (Tensor& s : sending_) release(s);  // the receive waited for this rank's earlier sends
  sending_.clear();
}

void Executor::pipeline_finish_sends() {
  if (sending_.empty()) return;
  opt_.pp_comm->wait_sends();
  for (Tensor& s : sending_) release(s);
  sending_.clear();
}

void Executor::pipeline_receive_grad() {
  phase_ = Phase::Backward;
  alloc_.set_phase(phase_);
  const BlockGraph& last = table_of(cfg_.layers - 1);
  const TensorDef& d = last.tensors()[last.output()];
  dnext_ = alloc_outer(d.dtype, d.numel, Category::ActivationGrads, "grad:final.in");
  pipeline_recv(dnext_, stage_ + 1, "pp.grad.recv", aux_);  // with the loss's gradient, if any
}

void Executor::sync_tied_embedding() {
  // The first stage's word embedding and the last stage's copy of it for the head: one weight,
  // so the two gradients are summed (Megatron's embedding group) before AdamW.
  if (!opt_.tie_comm || opt_.tie_comm->size() < 2 || st_.layout().wte < 0) return;
  const std::int64_t n = static_cast<std::int64_t>(cfg_.vocab) * cfg_.hidden;
  Tensor g = grad_at(st_.layout().wte, n);
  collective_f32("embedding.grads.all_reduce", "all_reduce", -1, g, [&](float* f) {
    opt_.tie_comm->all_reduce_sum(f, static_cast<std::size_t>(n), "embedding grads");
  });
}

StepOutput Executor::run_pipeline_step(const Schedule& s, int step, const std::vector<std::int32_t>& tokens,
                                       const std::vector<std::int32_t>& targets) {
  validate_schedule(s, graph_);
  const std::int64_t per = cfg_.tokens();
  const bool no_data = !be_.computes() && tokens.empty() && targets.empty();  // the simulator's
  if (!no_data && (static_cast<std::int64_t>(tokens.size()) != per * micros_ ||
                   static_cast<std::int64_t>(targets.size()) != per * micros_))
    throw Error("batch has " + std::to_string(tokens.size()) + " tokens, " + std::to_string(micros_) +
                " micro-batches of the model need " + std::to_string(per * micros_));
  // A micro-batch's forward: the forward sweep; its backward: the rest (the head, or at a later
  // stage the received gradient, comes at its first backward action).
  const std::size_t split = pipeline_split_ = forward_sweep_end(s);
  const bool first = stage_ == 0, last = stage_ + 1 == pp_;
  StepOutput out;
  begin_step(step, out);

  struct Micro {
    std::unique_ptr<ScheduleState> state;
    std::vector<BlockMemory> blocks;
    Tensor final_in, embed_mask, dnext, aux;
  };
  std::vector<Micro> mb(static_cast<std::size_t>(micros_));
  auto enter = [&](Micro& m, int k) {
    micro_ = k;
    blocks_.swap(m.blocks);
    final_in_ = m.final_in;
    embed_mask_ = m.embed_mask;
    dnext_ = m.dnext;
    aux_ = m.aux;
    m.final_in = m.embed_mask = m.dnext = m.aux = Tensor{};  // held by the executor while it runs
  };
  auto leave = [&](Micro& m) {
    blocks_.swap(m.blocks);
    m.final_in = final_in_;
    m.embed_mask = embed_mask_;
    m.dnext = dnext_;
    m.aux = aux_;
    final_in_ = embed_mask_ = dnext_ = aux_ = Tensor{};
  };
  // The micro-batch's load-balancing buffer: filled from the first stage on in its forward, the
  // whole of it received again with the input gradient in its backward (where a recompute may
  // write this stage's statistics first: the same values).
  auto alloc_aux = [&] {
    aux_ = alloc_outer(DType::F32, MoeAuxLayout{aux_layers(), cfg_.moe.experts}.size(), Category::LogitsLoss,
                       "moe.aux");
  };
  auto write_rows = [&](const Tensor& dst, const std::vector<std::int32_t>& src, int k, const char* name) {
    op(name, "batch", -1, 0, 4ull * static_cast<std::uint64_t>(per), Stream::Compute,
       [&] { be_.write_bytes(dst, src.empty() ? nullptr : src.data() + static_cast<std::size_t>(k * per)); });
  };
  double loss_sum = 0.0;
  try {
    op("batch", "batch", -1, 0, 0, Stream::Compute, [&] { be_.fill_zero(st_.grads); });
    for (const PipelineItem& it : pipeline_order(pp_, stage_, micros_)) {
      Micro& m = mb[static_cast<std::size_t>(it.micro)];
      // An item that does not start with a receive (the first stage's forward, the last's
      // backward, a backward that recomputes before its gradient arrives) waits for this rank's
      // sends to leave first and frees their buffers, as a receive does: no op begins while a
      // send waits, and the first stage's warm-up does not keep a sent activation per
      // micro-batch (Megatron-LM frees it once sent too).
      const bool receives_first =
          it.forward ? !first : !last && split < s.actions.size() && s.actions[split].kind == ActionKind::Backward;
      if (!receives_first) pipeline_finish_sends();
      if (it.forward) {
        m.state = std::make_unique<ScheduleState>(graph_, s);
        m.blocks.assign(static_cast<std::size_t>(cfg_.layers), BlockMemory{});
        for (int b = 0; b < cfg_.layers; ++b) m.blocks[static_cast<std::size_t>(b)].held.resize(table_of(b).tensors().size());
        enter(m, it.micro);
        phase_ = Phase::Forward;
        alloc_.set_phase(phase_);
        if (first) {
          write_rows(st_.tokens, tokens, it.micro, "batch.tokens");
          if (aux_on()) {
            alloc_aux();
            op("moe.aux.zero", "batch", -1, 0, aux_.bytes(), Stream::Compute, [&] { be_.fill_zero(aux_); });
          }
          embedding_forward();
        } else {
          Held& in0 = blocks_[0].held[table_of(0).input()];
          in0.t = alloc(table_of(0).input(), 0, Category::SavedActivations);
          in0.category = Category::SavedActivations;
          ledger_.push_back({0, table_of(0).input(), in0.t.bytes(), in0.t.id, in0.t.id, Phase::Forward,
                             Category::SavedActivations});
          in0.ledger = static_cast<int>(ledger_.size()) - 1;
          if (aux_on()) alloc_aux();
          pipeline_recv(in0.t, stage_ - 1, "pp.activation.recv", aux_);
        }
        for (std::size_t i = 0; i < split; ++i) run_action(*m.state, s, i, out);
        std::uint64_t sent = 0;  // the activation on its way, which the stage no longer holds
        if (!last) {
          sent = final_in_.bytes();
          pipeline_send(final_in_, stage_ + 1, "pp.activation.send", &aux_);
        }
        if (!saw_backward_) {  // what one micro-batch holds while it waits, for every policy
          saw_backward_ = true;
          measure_saved_bytes(out);
          out.held_after_forward = live_activation_bytes(out) - sent;
        }
        leave(m);
      } else {
        enter(m, it.micro);
        if (last) write_rows(st_.targets, targets, it.micro, "batch.targets");
        else if (aux_on()) {  // a backward's buffer, before any recompute writes into it
          phase_ = Phase::Backward;
          alloc_.set_phase(phase_);
          alloc_aux();
        }
        for (std::size_t i = split; i < s.actions.size(); ++i) run_action(*m.state, s, i, out);
        if (last) {
          be_.synchronize();
          loss_sum += read_mean_loss(/*keep_aux=*/true);  // the buffer goes back with the gradient
        }
        if (first) {
          write_rows(st_.tokens, tokens, it.micro, "batch.tokens");
          embedding_backward();
          release(aux_);
        } else {
          pipeline_send(dnext_, stage_ - 1, "pp.grad.send", &aux_);
        }
        leave(m);
        m.state.reset();
        std::vector<BlockMemory>().swap(m.blocks);  // its tensors are freed: only in-flight ones take room
      }
    }
    pipeline_finish_sends();
    sync_tied_embedding();
    // ZeRO-2: the outer parameters' gradients, summed over the micro-batches (and the tied
    // embedding's two stages), reduce-scattered once.
    if (zero_.gradients()) zero_close_bucket(-1);
    sync_tensor_parallel_gradients();
    sync_gradients();
    optimizer();
    be_.synchronize();
    // The mean over the step's tokens: the last stage's mean of its equal micro-batches' means,
    // over the replicas, then given to every stage.
    double loss = global_mean(opt_.comm, last ? loss_sum / static_cast<double>(micros_) : 0.0);
    opt_.pp_comm->all_reduce_sum(&loss, 1, "loss");
    out.loss = loss;
  } catch (...) {
    be_.synchronize();
    for (auto& m : mb) {
      for (auto& b : m.blocks)
        for (auto& h : b.held) release(h.t);
      for (Tensor* t : {&m.final_in, &m.embed_mask, &m.dnext, &m.aux}) release(*t);
    }
    release_step_buffers();
    throw;
  }
  return end_step(out);
}

}  // namespace remat
