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

std::string ScheduleState::module_of(const TensorSet& s) const {
  const int t = s.first();
  if (t < 0) return "";
  const int p = g_.tensors()[static_cast<std::size_t>(t)].producer;
  const std::string& m = p < 0 ? std::string() : g_.steps()[static_cast<std::size_t>(p)].module;
  return m.empty() ? "" : " (module " + m + ")";
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
    case ActionKind::Prefetch: e = move(index, a); break;
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

ActionEffect ScheduleState::move(std::size_t index, const Action& a) {
  auto fail = [&](const std::string& why) { throw ScheduleError(index, why); };
  BlockStatus& x = blocks_[static_cast<std::size_t>(a.block)];
  const std::string bn = "block " + std::to_string(a.block);
  const bool off = a.kind == ActionKind::Offload;
  TensorSet& from = off ? x.device : x.host;
  TensorSet& to = off ? x.host : x.device;
  ActionEffect e;
  if (a.keep.kind == KeepKind::Named) {
    if (a.keep.names->empty()) fail("the " + std::string(to_string(a.kind)) + " of " + bn + " names no tensor");
    e.targets = keep_set(index, a.keep);
    const TensorSet absent = e.targets - from;
    if (!absent.empty()) {
      const std::string t = first_name(absent) + "'" + module_of(absent);
      if (off) fail("'" + t + " of " + bn + (x.host.has(absent.first()) ? " is already offloaded" : " is not held"));
      fail("'" + t + " of " + bn + (x.device.has(absent.first()) ? " is on the device already" : " is not offloaded"));
    }
  } else {
    if (from.empty()) fail(bn + (off ? " holds nothing on the device to offload" : " has nothing on the host to prefetch"));
    e.targets = from;
  }
  to |= e.targets;
  from -= e.targets;
  return e;
}

// Where a backward rebuilds `inside` (none of them held): walking its steps from the last, each
// step's named tensors not yet rebuilt are made just before it, with the other named tensors
// those steps make; a tensor leaves after its last reader, as the executor frees it.
std::vector<InnerRecompute> ScheduleState::plan_inside(std::size_t index, int b, const TensorSet& inside) const {
  const auto& steps = g_.steps();
  const std::size_t nt = g_.tensors().size();
  TensorSet live = blocks_[static_cast<std::size_t>(b)].device, pending = inside;
  std::vector<InnerRecompute> out;
  for (int s = static_cast<int>(steps.size()) - 1; s >= 0 && !pending.empty(); --s) {
    const StepDef& sd = steps[static_cast<std::size_t>(s)];
    TensorSet want(nt);
    for (int t : sd.needs)
      if (pending.has(t)) want.insert(t);
    if (!want.empty()) {
      InnerRecompute r;
      r.before_step = s;
      auto f = g_.recompute_flops(live.bits(), want.bits(), &r.steps, b);
      if (!f)
        throw ScheduleError(index, "cannot rebuild '" + first_name(want) + "'" + module_of(want) + " inside block " + std::to_string(b) +
                                       "'s backward (before step '" + sd.name +
                                       "'): it needs the block input, which the block no longer holds");
      r.flops = *f;
      r.targets = TensorSet(nt);
      for (int st : r.steps)
        for (int t : steps[static_cast<std::size_t>(st)].out)
          if (pending.has(t)) r.targets.insert(t);
      pending -= r.targets;
      live |= r.targets;
      out.push_back(std::move(r));
    }
    for (int t : sd.needs)
      if (g_.last_need()[static_cast<std::size_t>(t)] == s) live -= TensorSet::of(nt, t);
  }
  return out;
}

ActionEffect ScheduleState::backward(std::size_t index, const Action& a) {
  auto fail = [&](const std::string& why) { throw ScheduleError(index, why); };
  const int b = a.block;
  BlockStatus& x = blocks_[static_cast<std::size_t>(b)];
  const std::string bn = "block " + std::to_string(b);
  if (b != next_back_)
    fail("backward of " + bn + ", but block " + std::to_string(next_back_) +
         " must be reversed first (blocks are reversed from the last to the first)");
  TensorSet inside(g_.tensors().size());
  if (a.keep.kind == KeepKind::Named) {
    inside = keep_set(index, a.keep);
    if (!(inside & input_).empty())
      fail("the input of " + bn + " cannot be rebuilt inside its backward: nothing in the block makes it");
    if (!(inside & x.device).empty())
      fail(bn + " still holds '" + first_name(inside & x.device) + "'" + module_of(inside & x.device) +
           "; a backward rebuilds only what the block no longer holds");
    if (!(inside & x.host).empty())
      fail("'" + first_name(inside & x.host) + "'" + module_of(inside & x.host) + " of " + bn +
           " is on the host; prefetch it instead of rebuilding it");
  }
  const TensorSet missing = saved_ - x.device - inside;
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
  if (!inside.empty()) e.inner = plan_inside(index, b, inside);
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
