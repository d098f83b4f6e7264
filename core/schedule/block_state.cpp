#include "core/schedule/block_state.h"

#include <algorithm>
#include <bit>
#include <string>

#include "core/util/error.h"

namespace remat {

bool TensorSet::empty() const {
  return std::all_of(words_.begin(), words_.end(), [](std::uint64_t w) { return w == 0; });
}

int TensorSet::first() const {
  for (std::size_t i = 0; i < words_.size(); ++i)
    if (words_[i]) return static_cast<int>(i * 64 + static_cast<std::size_t>(std::countr_zero(words_[i])));
  return -1;
}

TensorSet& TensorSet::operator|=(const TensorSet& o) {
  for (std::size_t i = 0; i < words_.size(); ++i) words_[i] |= o.words_[i];
  return *this;
}

TensorSet& TensorSet::operator&=(const TensorSet& o) {
  for (std::size_t i = 0; i < words_.size(); ++i) words_[i] &= o.words_[i];
  return *this;
}

TensorSet& TensorSet::operator-=(const TensorSet& o) {
  for (std::size_t i = 0; i < words_.size(); ++i) words_[i] &= ~o.words_[i];
  return *this;
}

std::vector<bool> TensorSet::bits() const {
  std::vector<bool> b(size_, false);
  for (std::size_t t = 0; t < size_; ++t) b[t] = has(static_cast<int>(t));
  return b;
}

ScheduleState::ScheduleState(const BlockGraph& g, const Schedule& s)
    : g_(g), layers_(g.config().layers), slots_(s.checkpoint_slots) {
  if (s.blocks != layers_)
    throw ScheduleError(0, "schedule is for " + std::to_string(s.blocks) + " blocks, the model has " +
                               std::to_string(layers_));
  const std::size_t nt = g.tensors().size();
  saved_ = TensorSet(nt);
  for (std::size_t i = 0; i < nt; ++i)
    if (g.tensors()[i].saved) saved_.insert(static_cast<int>(i));
  input_ = TensorSet::of(nt, g.input());
  output_ = TensorSet::of(nt, g.output());
  blocks_.assign(static_cast<std::size_t>(layers_), BlockStatus{TensorSet(nt), TensorSet(nt)});
  blocks_[0].device = input_;  // the embedding makes block 0's input
  next_back_ = layers_ - 1;
}

std::string ScheduleState::first_name(const TensorSet& s) const {
  const int t = s.first();
  return t < 0 ? "?" : g_.tensors()[static_cast<std::size_t>(t)].name;
}

// A keep-set as the block's tensors (the input included when asked).
TensorSet ScheduleState::keep_set(std::size_t index, const Keep& k) const {
  switch (k.kind) {
    case KeepKind::All: return saved_;
    case KeepKind::Input: return input_;
    case KeepKind::None: return TensorSet(g_.tensors().size());
    case KeepKind::Named: {
      TensorSet m(g_.tensors().size());
      for (const auto& n : *k.names) {
        auto id = g_.find(n);
        if (!id || !(saved_.has(*id) || *id == g_.input())) {
          std::string known;
          for (const auto& sn : g_.saved_names()) known += (known.empty() ? "" : ", ") + sn;
          throw ScheduleError(index, "'" + n + "' is not a saved tensor of the block (saved: " +
                                         known + ")");
        }
        m.insert(*id);
      }
      return m;
    }
  }
  return TensorSet(g_.tensors().size());
}

ActionEffect ScheduleState::apply(std::size_t index, const Action& a) {
  auto fail = [&](const std::string& why) { throw ScheduleError(index, why); };
  if (a.block < 0 || a.block >= layers_)
    fail("block " + std::to_string(a.block) + " is out of range 0.." + std::to_string(layers_ - 1));
  BlockStatus& x = blocks_[static_cast<std::size_t>(a.block)];
  const std::string bn = "block " + std::to_string(a.block);
  if ((a.kind == ActionKind::Forward || a.kind == ActionKind::Recompute) && x.reversed)
    fail(bn + " was already reversed; it cannot run forward again");
  ActionEffect e;
  switch (a.kind) {
    case ActionKind::Forward: e = forward(index, a); break;
    case ActionKind::Recompute: e = recompute(index, a); break;
    case ActionKind::Backward: e = backward(index, a); break;
    case ActionKind::Offload:
      if (x.device.empty()) fail(bn + " holds nothing on the device to offload");
      x.host |= x.device;
      x.device.clear();
      break;
    case ActionKind::Prefetch:
      if (x.host.empty()) fail(bn + " has nothing on the host to prefetch");
      x.device |= x.host;
      x.host.clear();
      break;
    case ActionKind::Drop:
      if (x.device.empty() && x.host.empty()) fail(bn + " holds nothing to drop");
      if (x.checkpoint) --ckpts_;
      x.device.clear();
      x.host.clear();
      x.checkpoint = false;
      break;
  }
  e.kind = a.kind;
  e.block = a.block;
  if (slots_ > 0 && ckpts_ > slots_)
    fail(std::to_string(ckpts_) + " checkpoints held at once; the schedule allows " +
         std::to_string(slots_));
  return e;
}

ActionEffect ScheduleState::forward(std::size_t index, const Action& a) {
  auto fail = [&](const std::string& why) { throw ScheduleError(index, why); };
  const int b = a.block;
  BlockStatus& x = blocks_[static_cast<std::size_t>(b)];
  const std::string bn = "block " + std::to_string(b);
  if ((x.device & input_).empty()) {
    if (!(x.host & input_).empty()) fail(bn + "'s input is on the host; prefetch it first");
    fail(bn + "'s input is not available (forward block " + std::to_string(b - 1) +
         " first, or keep it as a checkpoint)");
  }
  if (!(x.device - input_).empty())
    fail(bn + " already holds '" + first_name(x.device - input_) +
         "'; backward or drop it before running it forward again");
  if (!x.host.empty()) fail(bn + " has tensors on the host; prefetch or drop them first");
  const TensorSet keep = keep_set(index, a.keep);
  ActionEffect e;
  if (b + 1 < layers_) {
    const BlockStatus& n = blocks_[static_cast<std::size_t>(b + 1)];
    e.produces = !n.reversed && (n.device & input_).empty() && (n.host & input_).empty();
  } else {
    e.produces = !head_done_ && !final_live_;
  }
  e.live = x.device;
  e.targets = e.produces ? keep | output_ : keep;
  auto f = g_.recompute_flops(e.live.bits(), e.targets.bits(), &e.steps, b);
  if (!f) fail("internal: " + bn + " cannot be run forward");
  e.flops = *f;
  e.recompute = x.forwarded;
  if (a.keep.kind == KeepKind::Input && !x.checkpoint) {
    x.checkpoint = true;
    ++ckpts_;
  }
  const bool keep_input = !(keep & input_).empty();
  x.device = keep - input_;
  if (keep_input || x.checkpoint) x.device |= input_;
  x.forwarded = true;
  e.after = x.device;
  e.checkpoint = a.keep.kind == KeepKind::Input && x.checkpoint;
  if (e.produces) {
    if (b + 1 < layers_) blocks_[static_cast<std::size_t>(b + 1)].device |= input_;
    else final_live_ = true;
  }
  return e;
}

ActionEffect ScheduleState::recompute(std::size_t index, const Action& a) {
  auto fail = [&](const std::string& why) { throw ScheduleError(index, why); };
  BlockStatus& x = blocks_[static_cast<std::size_t>(a.block)];
  const std::string bn = "block " + std::to_string(a.block);
  if (!x.host.empty()) fail(bn + " has tensors on the host; prefetch them before recomputing");
  ActionEffect e;
  e.recompute = true;
  e.live = x.device;
  e.targets = keep_set(index, a.keep) - input_;
  auto f = g_.recompute_flops(e.live.bits(), e.targets.bits(), &e.steps, a.block);
  if (!f)
    fail("cannot rebuild '" + first_name(e.targets - x.device) + "' of " + bn +
         ": it needs the block input, which the block no longer holds");
  e.flops = *f;
  x.device |= e.targets;
  x.forwarded = true;
  e.after = x.device;
  e.checkpoint = a.keep.kind == KeepKind::Input && x.checkpoint;
  return e;
}

ActionEffect ScheduleState::backward(std::size_t index, const Action& a) {
  auto fail = [&](const std::string& why) { throw ScheduleError(index, why); };
  const int b = a.block;
  BlockStatus& x = blocks_[static_cast<std::size_t>(b)];
  const std::string bn = "block " + std::to_string(b);
  if (b != next_back_)
    fail("backward of " + bn + ", but block " + std::to_string(next_back_) +
         " must be reversed first (blocks are reversed from the last to the first)");
  const TensorSet missing = saved_ - x.device;
  if (!missing.empty()) {
    if (!(x.host & missing).empty())
      fail(bn + "'s backward needs '" + first_name(x.host & missing) +
           "', which is on the host (prefetch it first)");
    fail(bn + "'s backward needs '" + first_name(missing) +
         "', which the block no longer holds (recompute it first)");
  }
  ActionEffect e;
  if (b == layers_ - 1 && !head_done_) {
    if (!final_live_)
      fail("the loss needs the last block's output; forward block " + std::to_string(layers_ - 1) +
           " first");
    e.head_first = true;
    head_done_ = true;
    final_live_ = false;
  }
  e.flops = g_.flops_backward(b);
  if (x.checkpoint) --ckpts_;
  x.device.clear();
  x.host.clear();
  x.checkpoint = false;
  x.reversed = true;
  x.forwarded = true;
  --next_back_;
  return e;
}

void ScheduleState::finish(std::size_t actions) const {
  if (next_back_ >= 0)
    throw ScheduleError(actions, "the schedule ends before block " + std::to_string(next_back_) +
                                     " is reversed");
}

}  // namespace remat
