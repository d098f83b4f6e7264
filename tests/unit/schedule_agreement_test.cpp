// The validator and the executor read a schedule the same way: over random action sequences
// (legal and illegal, from a seeded generator) the validator accepts exactly the schedules the
// simulator runs, refuses the others at the same action, and counts the FLOPs and block
// forwards the executor's ops add up to; a run it accepts ends with every block's memory freed.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/backend/null/null_backend.h"
#include "core/engine/executor.h"
#include "core/engine/model_state.h"
#include "core/graph/block_graph.h"
#include "core/schedule/block_state.h"
#include "core/schedule/validator.h"
#include "core/util/error.h"

namespace remat {
namespace {

ModelConfig tiny(Family arch, AttentionImpl attn, double dropout) {
  ModelConfig m;
  m.name = "agreement";
  set_family(m, arch);
  m.layers = 4;
  m.hidden = 16;
  m.heads = 2;
  m.kv_heads = arch == Family::Llama ? 1 : 2;
  m.ffn = 32;
  m.seq = 4;
  m.positions = 4;
  m.batch = 1;
  m.vocab = 16;
  m.dropout = dropout;
  m.attention = attn;
  return m;
}

class Generator {
 public:
  Generator(const BlockGraph& g, std::uint64_t seed)
      : g_(g), L_(g.config().layers), names_(g.saved_names()), rng_(seed) {}

  Schedule make() {
    Schedule s;
    s.blocks = L_;
    s.checkpoint_slots = pick(4) == 0 ? 1 + pick(2) : 0;
    // The rules' state after the actions so far (every one of them legal): an action is tried on
    // a copy of it, instead of validating the whole schedule again for every try.
    std::optional<ScheduleState> st;
    st.emplace(g_, s);
    // A random walk over legal actions, then a greedy finish that reverses what it can. An
    // action is mostly taken only when the finish still succeeds after it; now and then a dead
    // end is left in (a block input lost for good), and the schedule ends unfinished.
    const std::size_t length = 4 + static_cast<std::size_t>(pick(24));
    for (int tries = 0; s.actions.size() < length && tries < 200; ++tries) {
      const Action a = random_action();
      std::optional<ScheduleState> next = st;
      bool keep = applies(*next, s.actions.size(), a);
      if (keep && pick(10) != 0) {
        Schedule probe = s;
        probe.actions.push_back(a);
        std::optional<ScheduleState> probe_st = next;
        keep = finish(probe, probe_st);
      }
      if (keep) {
        s.actions.push_back(a);
        st.emplace(*next);
      }
    }
    finish(s, st);
    // Sometimes one unchecked action somewhere: legal or not, both sides must agree.
    if (pick(3) == 0) {
      auto at = s.actions.begin() + pick(static_cast<int>(s.actions.size()) + 1);
      s.actions.insert(at, random_action());
    }
    return s;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  Keep random_keep() {
    switch (pick(4)) {
      case 0: return Keep::all();
      case 1: return Keep::input();
      case 2: return Keep::none();
      default: break;
    }
    // A few names: small sets reach the corners (only the input, only dropout masks).
    std::vector<std::string> k;
    for (int n = 1 + pick(3); n > 0; --n)
      k.push_back(names_[static_cast<std::size_t>(pick(static_cast<int>(names_.size())))]);
    return Keep::named(std::move(k));
  }

  Action random_action() {
    Action a;
    static constexpr ActionKind kinds[] = {
        ActionKind::Forward,  ActionKind::Forward, ActionKind::Forward, ActionKind::Recompute,
        ActionKind::Recompute, ActionKind::Backward, ActionKind::Backward, ActionKind::Offload,
        ActionKind::Prefetch, ActionKind::Drop};
    a.kind = kinds[pick(10)];
    a.block = pick(20) == 0 ? L_ : pick(L_);  // now and then out of range
    if (a.kind == ActionKind::Forward || a.kind == ActionKind::Recompute) a.keep = random_keep();
    return a;
  }

  // Whether `a` is legal as action `index` after what `st` holds; applies it to `st` (which is
  // of no further use when it is not).
  static bool applies(ScheduleState& st, std::size_t index, const Action& a) {
    try {
      st.apply(index, a);
      return true;
    } catch (const ScheduleError&) {
      return false;
    }
  }

  // Appends `a` when it is legal after the schedule so far (whose state is `st`).
  static bool try_push(Schedule& s, std::optional<ScheduleState>& st, Action a) {
    std::optional<ScheduleState> next = st;
    if (!applies(*next, s.actions.size(), a)) return false;
    s.actions.push_back(std::move(a));
    st.emplace(*next);
    return true;
  }

  // Appends actions until every block is reversed; false when stuck. `st` is the state of `s`.
  bool finish(Schedule& s, std::optional<ScheduleState>& st) {
    for (int step = 0; step < 8 * L_; ++step) {
      try {
        st->finish(s.actions.size());
        return true;
      } catch (const ScheduleError&) {
      }
      int next = L_ - 1;
      for (const Action& a : s.actions)
        if (a.kind == ActionKind::Backward) --next;
      if (try_push(s, st, {ActionKind::Backward, next, Keep::all()})) continue;
      bool moved = false;
      for (int b = next; b >= 0 && !moved; --b) moved = try_push(s, st, {ActionKind::Prefetch, b, Keep::all()});
      for (int b = 0; b <= next && !moved; ++b) moved = try_push(s, st, {ActionKind::Forward, b, Keep::all()});
      if (!moved) moved = try_push(s, st, {ActionKind::Recompute, next, Keep::all()});
      if (!moved) return false;  // stuck: the schedule stays unfinished (illegal)
    }
    return false;
  }

  const BlockGraph& g_;
  int L_;
  std::vector<std::string> names_;
  std::mt19937_64 rng_;
};

struct Ran {
  std::optional<std::size_t> refused_at;
  StepOutput out;
  std::uint64_t activations_left = 0, host_left = 0;
};

Ran run_on_null_backend(const ModelConfig& m, const Schedule& s) {
  NullBackend be;
  LogicalClock clock;
  TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
  ModelState state(m, be, alloc);
  Executor ex(state, be, alloc, nullptr, ExecOptions{});
  std::vector<std::int32_t> tok(static_cast<std::size_t>(m.tokens()), 0);
  Ran r;
  try {
    r.out = ex.run_step(s, 0, tok, tok);
  } catch (const ScheduleError& e) {
    r.refused_at = e.index();
  }
  for (Category c : {Category::SavedActivations, Category::Checkpoints, Category::RecomputeTemps,
                     Category::ActivationGrads})
    r.activations_left += alloc.live(Space::Device, c);
  r.host_left = alloc.live_total(Space::Host);
  return r;
}

void expect_agreement(const ModelConfig& m, int schedules) {
  BlockGraph g(m);
  // FLOPs outside the blocks (embedding, head): the same for every legal schedule.
  const Schedule base = store_all_schedule(m.layers);
  const ScheduleStats base_plan = validate_schedule(base, g);
  const Ran base_run = run_on_null_backend(m, base);
  const std::uint64_t outer_fwd = base_run.out.flops_forward - base_plan.flops_forward;
  const std::uint64_t outer_bwd = base_run.out.flops_backward - base_plan.flops_backward;

  int legal = 0, illegal = 0, replays = 0;
  for (int seed = 0; seed < schedules; ++seed) {
    Schedule s = Generator(g, static_cast<std::uint64_t>(seed)).make();
    std::optional<ScheduleStats> plan;
    std::optional<std::size_t> refused_at;
    std::string why;
    try {
      plan = validate_schedule(s, g);
    } catch (const ScheduleError& e) {
      refused_at = e.index();
      why = e.what();
    }
    const Ran r = run_on_null_backend(m, s);
    const std::string ctx = "seed " + std::to_string(seed) + ": " + why;
    ASSERT_EQ(r.refused_at, refused_at) << ctx;
    if (!plan) {
      ++illegal;
      continue;
    }
    ++legal;
    if (plan->flops_recompute > 0) ++replays;
    EXPECT_EQ(r.out.block_forwards, plan->block_forwards) << ctx;
    EXPECT_EQ(r.out.flops_recompute, plan->flops_recompute) << ctx;
    EXPECT_EQ(r.out.flops_forward, plan->flops_forward + outer_fwd) << ctx;
    EXPECT_EQ(r.out.flops_backward, plan->flops_backward + outer_bwd) << ctx;
    EXPECT_EQ(r.activations_left, 0u) << ctx;
    EXPECT_EQ(r.host_left, 0u) << ctx;
  }
  // The generator reaches both sides and schedules that replay blocks.
  EXPECT_GT(legal, schedules / 4);
  EXPECT_GT(illegal, schedules / 10);
  EXPECT_GT(replays, schedules / 10);
}

// A forward that keeps nothing of a block holding only its input, while the next block has its
// input already, runs no step: the input is not read, and the block holds nothing afterwards.
// So the next replay of the block before makes that input again, counted as the validator does.
TEST(ScheduleAgreement, AnInputNoStepReadsIsLetGoAndMadeAgain) {
  const ModelConfig m = tiny(Family::Gpt2, AttentionImpl::Naive, 0.1);
  BlockGraph g(m);
  Schedule s;
  s.blocks = m.layers;
  s.forward(0, Keep::input());
  s.forward(1, Keep::named({"block.in"}));
  s.forward(1, Keep::none());   // runs nothing; block 1 lets its input go
  s.forward(0, Keep::input());  // replays block 0 to make block 1's input again
  for (int b = 1; b < m.layers; ++b) s.forward(b, Keep::all());
  for (int b = m.layers - 1; b >= 0; --b) {
    if (b == 0) s.recompute(0, Keep::all());
    s.backward(b);
  }
  const ScheduleStats plan = validate_schedule(s, g);
  // Replaying block 0 runs it whole (for block 1's input); block 1's second forward and block
  // 0's recompute each rebuild the saved set from the input.
  std::vector<bool> input_only(g.tensors().size()), saved(g.tensors().size());
  input_only[static_cast<std::size_t>(g.input())] = true;
  for (std::size_t t = 0; t < saved.size(); ++t) saved[t] = g.tensors()[t].saved;
  const std::uint64_t rebuild = *g.recompute_flops(input_only, saved);
  EXPECT_EQ(plan.flops_recompute, g.flops_forward() + 2 * rebuild);
  const Ran r = run_on_null_backend(m, s);
  ASSERT_FALSE(r.refused_at);
  EXPECT_EQ(r.out.flops_recompute, plan.flops_recompute);
  EXPECT_EQ(r.out.block_forwards, plan.block_forwards);
  EXPECT_EQ(r.activations_left, 0u);
}

TEST(ScheduleAgreement, Gpt2NaiveWithDropout) {
  expect_agreement(tiny(Family::Gpt2, AttentionImpl::Naive, 0.1), 250);
}

TEST(ScheduleAgreement, LlamaFlash) {
  expect_agreement(tiny(Family::Llama, AttentionImpl::Flash, 0.0), 250);
}

}  // namespace
}  // namespace remat
