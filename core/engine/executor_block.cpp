// The block actions: forward (and its replays), recompute, backward, offload, prefetch, drop.
#include <algorithm>

#include "core/engine/executor.h"
#include "core/util/error.h"

namespace remat {

Tensor Executor::alloc(int tensor, int block, Category c) {
  const TensorDef& d = table_of(block).tensors()[tensor];
  // A block's output is the next block's input (or the final norm's input after the last).
  if (tensor == table_of(block).output()) {
    if (block + 1 < cfg_.layers) return alloc_.allocate(d.dtype, d.numel, {c, block + 1, "block.in"});
    return alloc_.allocate(d.dtype, d.numel, {c, -1, "final.in"});
  }
  return alloc_.allocate(d.dtype, d.numel, {c, block, d.name});
}

std::uint64_t Executor::step_bytes(int block, const StepDef& s) const {
  const auto& T = table_of(block).tensors();
  std::uint64_t b = 0;
  for (int t : s.in) b += T[t].bytes;
  for (int t : s.out) b += T[t].bytes;
  return b;
}

void Executor::release_held(int b, int tensor, const char* decision) {
  Held& h = blocks_[static_cast<std::size_t>(b)].held[tensor];
  if (h.ledger >= 0) {
    Ledger& l = ledger_[static_cast<std::size_t>(h.ledger)];
    l.last_id = h.t.id;
    if (l.decision.empty()) l.decision = decision;
  }
  release(h.t);
  h = Held{};
}

void Executor::forward(int b, const ActionEffect& e) {
  BlockMemory& bs = blocks_[static_cast<std::size_t>(b)];
  const auto& T = table_of(b).tensors();
  const auto& S = table_of(b).steps();
  const int in = table_of(b).input(), outp = table_of(b).output();
  phase_ = e.recompute ? Phase::Recompute : Phase::Forward;
  alloc_.set_phase(phase_);
  if (bs.pending_copy) {
    be_.join_copies();
    bs.pending_copy = false;
  }
  const Category made = phase_ == Phase::Forward ? Category::SavedActivations : Category::RecomputeTemps;
  gather_checkpoint(b);  // a distributed checkpoint, whole again for the recompute
  // ZeRO-3: the block's parameters, gathered for this forward or recompute.
  if (zero_.parameters() && !e.steps.empty()) zero_gather(zero_blocks_[static_cast<std::size_t>(b)], b);

  ++out_->block_forwards;

  // The steps to run and what the block holds when this action ends are the state's.
  const std::vector<int>& run = e.steps;
  const TensorSet& stays = e.after;
  // Last step of this action that reads each tensor.
  std::vector<int> last_use(T.size(), -1);
  for (int s : run)
    for (int t : S[s].in) last_use[t] = s;

  std::vector<Tensor> cur(T.size());
  for (std::size_t t = 0; t < T.size(); ++t) cur[t] = bs.held[t].t;
  std::vector<Tensor> temps;  // outputs recomputed next to a copy the block already holds
  for (int s : run) {
    const StepDef& sd = S[s];
    for (int t : sd.out) {
      if (cur[t]) {
        Tensor tmp = alloc(t, b, Category::RecomputeTemps);
        temps.push_back(tmp);
        cur[t] = tmp;
        continue;
      }
      cur[t] = alloc(t, b, made);
      if (t != outp && T[t].saved) {
        Ledger l{b, t, T[t].bytes, cur[t].id, cur[t].id, phase_, made};
        if (phase_ == Phase::Recompute) l.decision = "recomputed";
        ledger_.push_back(l);
        bs.held[t].ledger = static_cast<int>(ledger_.size()) - 1;
      } else {
        bs.held[t].ledger = -1;
      }
      bs.held[t].t = cur[t];
      bs.held[t].category = made;
    }
    run_forward_step(b, sd, cur);
    // Free what this action no longer needs.
    auto done = [&](int t) {
      if (t == outp || stays.has(t)) return;
      for (auto& tmp : temps)
        if (tmp.id && tmp.id == cur[t].id) {
          release(tmp);
          cur[t] = bs.held[t].t;
          return;
        }
      if (bs.held[t].t) release_held(b, t, T[t].saved || t == in ? "discarded" : "temporary");
      cur[t] = Tensor{};
    };
    for (int t : sd.in)
      if (last_use[t] == s) done(t);
    for (int t : sd.out)
      if (last_use[t] < s) done(t);  // made here, read by no later step of this action
  }
  for (auto& tmp : temps)
    if (tmp.id) release(tmp);
  zero_release_gathered();

  if (e.produces) {
    Held& o = bs.held[outp];
    if (b + 1 < cfg_.layers) {
      const int nin_t = table_of(b + 1).input();
      Held& nin = blocks_[static_cast<std::size_t>(b + 1)].held[nin_t];
      nin.t = o.t;
      nin.category = o.category;
      Ledger l{b + 1, nin_t, T[in].bytes, o.t.id, o.t.id, phase_, o.category};
      if (phase_ == Phase::Recompute) l.decision = "recomputed";
      ledger_.push_back(l);
      nin.ledger = static_cast<int>(ledger_.size()) - 1;
    } else {
      final_in_ = o.t;
    }
    o = Held{};
  }
  // What the block held before, keeps no longer, and no step read (an unread input).
  for (std::size_t t = 0; t < T.size(); ++t)
    if (bs.held[t].t && !stays.has(static_cast<int>(t)))
      release_held(b, static_cast<int>(t), "discarded");
  if (e.checkpoint && bs.held[in].t && bs.held[in].category != Category::Checkpoints) {
    alloc_.retag(bs.held[in].t, Category::Checkpoints);
    bs.held[in].category = Category::Checkpoints;
    if (bs.held[in].ledger >= 0) {
      ledger_[static_cast<std::size_t>(bs.held[in].ledger)].category = Category::Checkpoints;
      ledger_[static_cast<std::size_t>(bs.held[in].ledger)].decision = "checkpoint";
    }
  }
  if (distribute_ && e.checkpoint && phase_ == Phase::Forward && bs.held[in].t && bs.split_input == 0)
    split_checkpoint(b);
}

void Executor::recompute_inside(int b, const InnerRecompute& r, std::vector<Tensor>& cur) {
  BlockMemory& bs = blocks_[static_cast<std::size_t>(b)];
  const auto& T = table_of(b).tensors();
  const auto& S = table_of(b).steps();
  phase_ = Phase::Recompute;
  alloc_.set_phase(phase_);
  std::vector<int> last_use(T.size(), -1);  // the last of these steps that reads each tensor
  for (int s : r.steps)
    for (int t : S[s].in) last_use[t] = s;
  // The steps read what the block holds and write new tensors: the targets, kept in the block,
  // and the rest, freed after their last reader here (a copy of a tensor the block holds too).
  std::vector<Tensor> rc = cur;
  std::vector<bool> mine(T.size(), false);
  for (int s : r.steps) {
    const StepDef& sd = S[s];
    for (int t : sd.out) {
      rc[t] = alloc(t, b, Category::RecomputeTemps);
      mine[t] = true;
      if (!r.targets.has(t)) continue;
      Held& h = bs.held[t];
      h.t = cur[t] = rc[t];
      h.category = Category::RecomputeTemps;
      ledger_.push_back({b, t, T[t].bytes, h.t.id, h.t.id, Phase::Recompute, Category::RecomputeTemps});
      ledger_.back().decision = "recomputed";
      h.ledger = static_cast<int>(ledger_.size()) - 1;
    }
    run_forward_step(b, sd, rc);
    auto done = [&](int t) {
      if (!mine[t] || r.targets.has(t)) return;
      release(rc[t]);
      mine[t] = false;
    };
    for (int t : sd.in)
      if (last_use[t] == s) done(t);
    for (int t : sd.out)
      if (last_use[t] < s) done(t);
  }
  phase_ = Phase::Backward;
  alloc_.set_phase(phase_);
}

void Executor::backward(int b, const ActionEffect& e) {
  BlockMemory& bs = blocks_[static_cast<std::size_t>(b)];
  const auto& T = table_of(b).tensors();
  const auto& S = table_of(b).steps();
  phase_ = Phase::Backward;
  alloc_.set_phase(phase_);
  if (bs.pending_copy) {
    be_.join_copies();
    bs.pending_copy = false;
  }
  const int in = table_of(b).input(), outp = table_of(b).output();
  gather_checkpoint(b);
  // ZeRO-3 gathers the block's parameters again; ZeRO-2 gives its gradients a bucket.
  if (zero_.parameters()) zero_gather(zero_blocks_[static_cast<std::size_t>(b)], b);
  if (zero_.gradients()) zero_open_bucket(zero_blocks_[static_cast<std::size_t>(b)], b);
  std::vector<Tensor> cur(T.size()), grad(T.size());
  std::vector<bool> fresh(T.size(), false);
  for (std::size_t t = 0; t < T.size(); ++t) cur[t] = bs.held[t].t;
  grad[outp] = dnext_;
  dnext_ = Tensor{};
  auto inner = e.inner.begin();
  for (int s = static_cast<int>(S.size()) - 1; s >= 0; --s) {
    const StepDef& sd = S[s];
    if (sd.op == OpKind::DropoutMask) continue;
    for (; inner != e.inner.end() && inner->before_step == s; ++inner) recompute_inside(b, *inner, cur);
    std::vector<bool> acc(sd.in.size(), false);
    for (std::size_t k = 0; k < sd.in.size(); ++k) {
      int t = sd.in[k];
      if (T[t].dtype == DType::U8 || T[t].dtype == DType::I32) continue;  // masks and routing carry no gradient
      const bool always = (op_traits(sd.op).always_acc >> k) & 1u;
      if (!grad[t]) {
        grad[t] = alloc_.allocate(T[t].dtype, T[t].numel,
                                  {Category::ActivationGrads, b,
                                   "grad:" + T[t].name});
        fresh[t] = true;
      }
      if (fresh[t] && always) {
        op("h" + std::to_string(b) + ".zero_grad", "zero", b, 0, grad[t].bytes(), Stream::Compute,
           [&] { be_.fill_zero(grad[t]); });
        fresh[t] = false;
      }
      acc[k] = !fresh[t];
      fresh[t] = false;
    }
    if (tp_ > 1 && sd.op == OpKind::Linear)
      tp_linear_backward(b, sd, cur, grad, acc);
    else if (tp_ > 1 && sd.op == OpKind::QkNorm)
      tp_qk_norm_backward(b, sd, cur, grad, acc);
    else
      op("h" + std::to_string(b) + "." + sd.name + ".backward", sd.name, b, sd.bwd_flops(graph_.windowed(b)),
         step_bytes(b, sd) * 2, Stream::Compute, [&] { run_backward_step(b, sd, cur, grad, acc); });
    for (int t : sd.out)
      if (grad[t]) release(grad[t]);
    for (int t : sd.needs)
      if (table_of(b).last_need()[t] == s && bs.held[t].t) {
        release_held(b, t, bs.held[t].category == Category::Checkpoints ? "checkpoint" : "kept");
        cur[t] = Tensor{};
      }
  }
  for (std::size_t t = 0; t < T.size(); ++t)
    if (bs.held[t].t) release_held(b, static_cast<int>(t), "kept");
  dnext_ = grad[in];
  zero_release_gathered();
  if (zero_.gradients()) {
    sync_tensor_parallel_gradients(b);
    zero_close_bucket(b);
  }
}

void Executor::offload(int b, const TensorSet& which) {
  BlockMemory& bs = blocks_[static_cast<std::size_t>(b)];
  for (std::size_t t = 0; t < bs.held.size(); ++t) {
    Held& h = bs.held[t];
    if (!h.t || h.on_host || !which.has(static_cast<int>(t))) continue;
    const TensorDef& d = table_of(b).tensors()[t];
    Tensor host = alloc_.allocate(d.dtype, d.numel, {Category::HostOffloaded, b, d.name}, Space::Host);
    op("h" + std::to_string(b) + ".offload." + d.name, "offload", b, 0, d.bytes, Stream::CopyToHost,
       [&] { be_.copy(host, h.t); });
    if (h.ledger >= 0) ledger_[static_cast<std::size_t>(h.ledger)].offloaded = true;
    release(h.t);
    h.t = host;
    h.on_host = true;
  }
}

void Executor::prefetch(int b, const TensorSet& which) {
  BlockMemory& bs = blocks_[static_cast<std::size_t>(b)];
  for (std::size_t t = 0; t < bs.held.size(); ++t) {
    Held& h = bs.held[t];
    if (!h.t || !h.on_host || !which.has(static_cast<int>(t))) continue;
    const TensorDef& d = table_of(b).tensors()[t];
    Tensor dev = alloc_.allocate(d.dtype, d.numel,
                                 {h.category, b, static_cast<int>(t) == table_of(b).input() ? "block.in" : d.name});
    op("h" + std::to_string(b) + ".prefetch." + d.name, "prefetch", b, 0, d.bytes,
       Stream::CopyToDevice, [&] { be_.copy(dev, h.t); });
    release(h.t);
    h.t = dev;
    h.on_host = false;
    if (h.ledger >= 0) {
      Ledger& l = ledger_[static_cast<std::size_t>(h.ledger)];
      l.decision = "offloaded";
    }
  }
  bs.pending_copy = true;
}

void Executor::drop(int b) {
  BlockMemory& bs = blocks_[static_cast<std::size_t>(b)];
  for (std::size_t t = 0; t < bs.held.size(); ++t)
    if (bs.held[t].t) release_held(b, static_cast<int>(t), "discarded");
}

void Executor::check_memory(const ScheduleState& state, std::size_t index, int b) const {
  const BlockStatus& want = state.block(b);
  const auto& held = blocks_[static_cast<std::size_t>(b)].held;
  for (std::size_t t = 0; t < held.size(); ++t) {
    const int ti = static_cast<int>(t);
    const bool dev = held[t].t && !held[t].on_host, host = held[t].t && held[t].on_host;
    if (dev == want.device.has(ti) && host == want.host.has(ti)) continue;
    throw Error("internal: after schedule action " + std::to_string(index) + " block " +
                std::to_string(b) + (dev || host ? " holds '" : " lacks '") +
                table_of(b).tensors()[t].name + "' on the " +
                (host || want.host.has(ti) ? "host" : "device") +
                ", which the schedule's rules say it " + (dev || host ? "does not" : "does"));
  }
  // A stage before the last sends that output on at the end of the forward sweep.
  const bool sent = stage_ + 1 < pp_ && index >= pipeline_split_;
  if (static_cast<bool>(final_in_) != (state.final_live() && !sent))
    throw Error("internal: after schedule action " + std::to_string(index) +
                " the last block's output is " + (final_in_ ? "held" : "missing") +
                " against the schedule's rules");
}

}  // namespace remat
