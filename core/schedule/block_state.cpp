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
  for (int i = 0; i < g.table_count(); ++i) {
    const BlockGraph& t = g.table(i);
    const std::size_t nt = t.tensors().size();
    Sets x{TensorSet(nt), TensorSet::of(nt, t.input()), TensorSet::of(nt, t.output())};
    for (std::size_t k = 0; k < nt; ++k)
      if (t.tensors()[k].saved) x.saved.insert(static_cast<int>(k));
    sets_.push_back(std::move(x));
  }
  for (int b = 0; b < layers_; ++b) {
    const std::size_t nt = this->g(b).tensors().size();
    blocks_.push_back(BlockStatus{TensorSet(nt), TensorSet(nt)});
  }
  blocks_[0].device = sets(0).input;  // the embedding makes block 0's input
  next_back_ = layers_ - 1;
}

std::string ScheduleState::module_of(int b, const TensorSet& s) const {
  const int t = s.first();
  if (t < 0) return "";
  const int p = g(b).tensors()[static_cast<std::size_t>(t)].producer;
  const std::string& m = p < 0 ? std::string() : g(b).steps()[static_cast<std::size_t>(p)].module;
  return m.empty() ? "" : " (module " + m + ")";
}

std::string ScheduleState::first_name(int b, const TensorSet& s) const {
  const int t = s.first();
  return t < 0 ? "?" : g(b).tensors()[static_cast<std::size_t>(t)].name;
}

// A keep-set as the block's tensors (the input included when asked).
TensorSet ScheduleState::keep_set(std::size_t index, int b, const Keep& k) const {
  const BlockGraph& t = g(b);
  switch (k.kind) {
    case KeepKind::All: return sets(b).saved;
    case KeepKind::Input: return sets(b).input;
    case KeepKind::None: return TensorSet(t.tensors().size());
    case KeepKind::Named: {
      TensorSet m(t.tensors().size());
      for (const auto& n : *k.names) {
        auto id = t.find(n);
        if (!id || !(sets(b).saved.has(*id) || *id == t.input())) {
          std::string known;
          for (const auto& sn : t.saved_names()) known += (known.empty() ? "" : ", ") + sn;
          throw ScheduleError(index, "'" + n + "' is not a saved tensor of " +
                                         (g_.uniform() ? std::string("the block") : "block " + std::to_string(b)) +
                                         " (saved: " + known + ")");
        }
        m.insert(*id);
      }
      return m;
    }
  }
  return TensorSet(t.tensors().size());
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
  if ((x.device & sets(b).input).empty()) {
    if (!(x.host & sets(b).input).empty()) fail(bn + "'s input is on the host; prefetch it first");
    fail(bn + "'s input is not available (forward block " + std::to_string(b - 1) +
         " first, or keep it as a checkpoint)");
  }
  if (!(x.device - sets(b).input).empty())
    fail(bn + " already holds '" + first_name(b, x.device - sets(b).input) +
         "'; backward or drop it before running it forward again");
  if (!x.host.empty()) fail(bn + " has tensors on the host; prefetch or drop them first");
  const TensorSet keep = keep_set(index, b, a.keep);
  ActionEffect e;
  if (b + 1 < layers_) {
    const BlockStatus& n = blocks_[static_cast<std::size_t>(b + 1)];
    e.produces = !n.reversed && (n.device & sets(b + 1).input).empty() && (n.host & sets(b + 1).input).empty();
  } else {
    e.produces = !head_done_ && !final_live_;
  }
  e.live = x.device;
  e.targets = e.produces ? keep | sets(b).output : keep;
  auto f = g(b).recompute_flops(e.live.bits(), e.targets.bits(), &e.steps, b);
  if (!f) fail("internal: " + bn + " cannot be run forward");
  e.flops = *f;
  e.recompute = x.forwarded;
  if (a.keep.kind == KeepKind::Input && !x.checkpoint) {
    x.checkpoint = true;
    ++ckpts_;
  }
  const bool keep_input = !(keep & sets(b).input).empty();
  x.device = keep - sets(b).input;
  if (keep_input || x.checkpoint) x.device |= sets(b).input;
  x.forwarded = true;
  e.after = x.device;
  e.checkpoint = a.keep.kind == KeepKind::Input && x.checkpoint;
  if (e.produces) {
    if (b + 1 < layers_) blocks_[static_cast<std::size_t>(b + 1)].device |= sets(b + 1).input;
    else final_live_ = true;
  }
  return e;
}

ActionEffect ScheduleState::recompute(std::size_t index, const Action& a) {
  auto fail = [&](const std::string& why) { throw ScheduleError(index, why); };
  const int b = a.block;
  BlockStatus& x = blocks_[static_cast<std::size_t>(b)];
  const std::string bn = "block " + std::to_string(a.block);
  if (!x.host.empty()) fail(bn + " has tensors on the host; prefetch them before recomputing");
  ActionEffect e;
  e.recompute = true;
  e.live = x.device;
  e.targets = keep_set(index, b, a.keep) - sets(b).input;
  auto f = g(b).recompute_flops(e.live.bits(), e.targets.bits(), &e.steps, a.block);
  if (!f)
    fail("cannot rebuild '" + first_name(b, e.targets - x.device) + "' of " + bn +
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
  const int b = a.block;
  BlockStatus& x = blocks_[static_cast<std::size_t>(b)];
  const std::string bn = "block " + std::to_string(a.block);
  const bool off = a.kind == ActionKind::Offload;
  TensorSet& from = off ? x.device : x.host;
  TensorSet& to = off ? x.host : x.device;
  ActionEffect e;
  if (a.keep.kind == KeepKind::Named) {
    if (a.keep.names->empty()) fail("the " + std::string(to_string(a.kind)) + " of " + bn + " names no tensor");
    e.targets = keep_set(index, b, a.keep);
    const TensorSet absent = e.targets - from;
    if (!absent.empty()) {
      const std::string t = first_name(b, absent) + "'" + module_of(b, absent);
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
  const auto& steps = g(b).steps();
  const std::size_t nt = g(b).tensors().size();
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
      auto f = g(b).recompute_flops(live.bits(), want.bits(), &r.steps, b);
      if (!f)
        throw ScheduleError(index, "cannot rebuild '" + first_name(b, want) + "'" + module_of(b, want) + " inside block " + std::to_string(b) +
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
      if (g(b).last_need()[static_cast<std::size_t>(t)] == s) live -= TensorSet::of(nt, t);
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
  TensorSet inside(g(b).tensors().size());
  if (a.keep.kind == KeepKind::Named) {
    inside = keep_set(index, b, a.keep);
    if (!(inside & sets(b).input).empty())
      fail("the input of " + bn + " cannot be rebuilt inside its backward: nothing in the block makes it");
    if (!(inside & x.device).empty())
      fail(bn + " still holds '" + first_name(b, inside & x.device) + "'" + module_of(b, inside & x.device) +
           "; a backward rebuilds only what the block no longer holds");
    if (!(inside & x.host).empty())
      fail("'" + first_name(b, inside & x.host) + "'" + module_of(b, inside & x.host) + " of " + bn +
           " is on the host; prefetch it instead of rebuilding it");
  }
  const TensorSet missing = sets(b).saved - x.device - inside;
  if (!missing.empty()) {
    if (!(x.host & missing).empty())
      fail(bn + "'s backward needs '" + first_name(b, x.host & missing) +
           "', which is on the host (prefetch it first)");
    fail(bn + "'s backward needs '" + first_name(b, missing) +
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
  e.flops = g(b).flops_backward(b);
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
