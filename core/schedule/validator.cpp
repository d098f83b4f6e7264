#include "core/schedule/validator.h"

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "core/util/error.h"

namespace remat {

namespace {

using Mask = std::uint64_t;

struct BlockInfo {
  Mask live = 0;  // on the device
  Mask host = 0;  // offloaded
  bool ckpt = false;
  bool forwarded = false;
  bool reversed = false;
};

struct Tables {
  Mask saved = 0;
  Mask input = 0;
  Mask output = 0;
  std::vector<std::uint64_t> step_flops;
};

std::vector<bool> to_bits(Mask m, std::size_t n) {
  std::vector<bool> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = (m >> i) & 1u;
  return v;
}

std::string first_name(const BlockGraph& g, Mask m) {
  for (std::size_t i = 0; i < g.tensors().size(); ++i)
    if ((m >> i) & 1u) return g.tensors()[i].name;
  return "?";
}

}  // namespace

ScheduleStats validate_schedule(const Schedule& s, const BlockGraph& g) {
  const int L = g.config().layers;
  const std::size_t nt = g.tensors().size();
  if (nt > 64) throw Error("block table has more than 64 tensors");
  if (s.blocks != L)
    throw ScheduleError(0, "schedule is for " + std::to_string(s.blocks) + " blocks, the model has " +
                               std::to_string(L));
  Tables t;
  for (std::size_t i = 0; i < nt; ++i)
    if (g.tensors()[i].saved) t.saved |= Mask{1} << i;
  t.input = Mask{1} << g.input();
  t.output = Mask{1} << g.output();

  // Resolve a keep-set into a mask of the block's tensors (the input included when asked).
  auto keep_mask = [&](std::size_t idx, const Keep& k) -> Mask {
    switch (k.kind) {
      case KeepKind::All: return t.saved;
      case KeepKind::Input: return t.input;
      case KeepKind::None: return 0;
      case KeepKind::Named: {
        Mask m = 0;
        for (const auto& n : *k.names) {
          auto id = g.find(n);
          if (!id || !(((t.saved | t.input) >> *id) & 1u)) {
            std::string known;
            for (const auto& sn : g.saved_names()) known += (known.empty() ? "" : ", ") + sn;
            throw ScheduleError(idx, "'" + n + "' is not a saved tensor of the block (saved: " +
                                         known + ")");
          }
          m |= Mask{1} << *id;
        }
        return m;
      }
    }
    return 0;
  };

  std::vector<BlockInfo> b(static_cast<std::size_t>(L));
  b[0].live = t.input;  // the embedding makes block 0's input
  bool final_live = false, head_done = false;
  int next_back = L - 1, ckpts = 0;
  ScheduleStats st;

  for (std::size_t i = 0; i < s.actions.size(); ++i) {
    const Action& a = s.actions[i];
    auto fail = [&](const std::string& why) { throw ScheduleError(i, why); };
    if (a.block < 0 || a.block >= L)
      fail("block " + std::to_string(a.block) + " is out of range 0.." + std::to_string(L - 1));
    BlockInfo& x = b[static_cast<std::size_t>(a.block)];
    const std::string bn = "block " + std::to_string(a.block);
    if ((a.kind == ActionKind::Forward || a.kind == ActionKind::Recompute) && x.reversed)
      fail(bn + " was already reversed; it cannot run forward again");
    switch (a.kind) {
      case ActionKind::Forward: {
        if (!(x.live & t.input)) {
          if (x.host & t.input) fail(bn + "'s input is on the host; prefetch it first");
          fail(bn + "'s input is not available (forward block " + std::to_string(a.block - 1) +
               " first, or keep it as a checkpoint)");
        }
        if (x.live & ~t.input) fail(bn + " already holds '" + first_name(g, x.live & ~t.input) +
                                    "'; backward or drop it before running it forward again");
        if (x.host) fail(bn + " has tensors on the host; prefetch or drop them first");
        Mask keep = keep_mask(i, a.keep);
        bool produce;
        if (a.block + 1 < L) {
          const BlockInfo& n = b[static_cast<std::size_t>(a.block + 1)];
          produce = !n.reversed && !(n.live & t.input) && !(n.host & t.input);
        } else {
          produce = !head_done && !final_live;
        }
        Mask targets = keep | (produce ? t.output : 0);
        auto f = g.recompute_flops(to_bits(x.live, nt), to_bits(targets, nt));
        if (!f) fail("internal: " + bn + " cannot be run forward");
        ++st.block_forwards;
        if (x.forwarded) {
          st.flops_recompute += *f;
        } else {
          st.flops_forward += *f;
          ++st.first_forwards;
        }
        bool keep_input = (keep & t.input) != 0;
        if (a.keep.kind == KeepKind::Input && !x.ckpt) {
          x.ckpt = true;
          ++ckpts;
        }
        x.live = (keep & ~t.input) | ((keep_input || x.ckpt) ? t.input : 0);
        x.forwarded = true;
        if (produce) {
          if (a.block + 1 < L) b[static_cast<std::size_t>(a.block + 1)].live |= t.input;
          else final_live = true;
        }
        break;
      }
      case ActionKind::Recompute: {
        if (x.host) fail(bn + " has tensors on the host; prefetch them before recomputing");
        Mask keep = keep_mask(i, a.keep) & ~t.input;
        auto f = g.recompute_flops(to_bits(x.live, nt), to_bits(keep, nt));
        if (!f) fail("cannot rebuild '" + first_name(g, keep & ~x.live) + "' of " + bn +
                     ": it needs the block input, which the block no longer holds");
        ++st.block_forwards;
        st.flops_recompute += *f;
        x.live |= keep;
        x.forwarded = true;
        break;
      }
      case ActionKind::Backward: {
        if (a.block != next_back)
          fail("backward of " + bn + ", but block " + std::to_string(next_back) +
               " must be reversed first (blocks are reversed from the last to the first)");
        Mask missing = t.saved & ~x.live;
        if (missing) {
          if (x.host & missing)
            fail(bn + "'s backward needs '" + first_name(g, x.host & missing) +
                 "', which is on the host (prefetch it first)");
          fail(bn + "'s backward needs '" + first_name(g, missing) +
               "', which the block no longer holds (recompute it first)");
        }
        if (a.block == L - 1 && !head_done) {
          if (!final_live) fail("the loss needs the last block's output; forward block " +
                                std::to_string(L - 1) + " first");
          head_done = true;
          final_live = false;
        }
        st.flops_backward += g.flops_backward();
        if (x.ckpt) --ckpts;
        x = BlockInfo{0, 0, false, true, true};
        --next_back;
        break;
      }
      case ActionKind::Offload:
        if (!x.live) fail(bn + " holds nothing on the device to offload");
        x.host |= x.live;
        x.live = 0;
        ++st.offloads;
        break;
      case ActionKind::Prefetch:
        if (!x.host) fail(bn + " has nothing on the host to prefetch");
        x.live |= x.host;
        x.host = 0;
        ++st.prefetches;
        break;
      case ActionKind::Drop:
        if (!x.live && !x.host) fail(bn + " holds nothing to drop");
        if (x.ckpt) --ckpts;
        x.live = x.host = 0;
        x.ckpt = false;
        break;
    }
    if (s.checkpoint_slots > 0 && ckpts > s.checkpoint_slots)
      fail(std::to_string(ckpts) + " checkpoints held at once; the schedule allows " +
           std::to_string(s.checkpoint_slots));
    st.max_checkpoints = std::max(st.max_checkpoints, ckpts);
  }
  if (next_back >= 0)
    throw ScheduleError(s.actions.size(),
                        "the schedule ends before block " + std::to_string(next_back) +
                            " is reversed");
  return st;
}

}  // namespace remat
