// ScheduleState says what each action does: the tensor sets of any size, and the effects the
// executor acts on (steps, what a block holds afterwards, the output passed on, the head).
#include <gtest/gtest.h>

#include "core/graph/block_graph.h"
#include "core/schedule/block_state.h"
#include "core/util/error.h"
#include "engine_test_util.h"

namespace remat {
namespace {

TEST(TensorSet, HoldsIndicesPastSixtyFour) {
  TensorSet a(130), b(130);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.first(), -1);
  a.insert(129);
  a.insert(70);
  b.insert(70);
  b.insert(3);
  EXPECT_EQ(a.first(), 70);
  EXPECT_EQ((a & b).first(), 70);
  EXPECT_EQ((a - b).first(), 129);
  EXPECT_EQ((a | b).first(), 3);
  EXPECT_TRUE((b - a - TensorSet::of(130, 3)).empty());
  EXPECT_FALSE((a | b) == a);
  EXPECT_TRUE(a.has(129));
  EXPECT_TRUE(a.has(70));
  EXPECT_FALSE(a.has(64));
  EXPECT_FALSE(a.has(128));
  const std::vector<bool> bits = (a | b).bits();
  ASSERT_EQ(bits.size(), 130u);
  for (int t = 0; t < 130; ++t) EXPECT_EQ(bits[static_cast<std::size_t>(t)], t == 3 || t == 70 || t == 129) << t;
  TensorSet c(130);
  c.insert(63);
  c.insert(64);
  EXPECT_EQ((c - TensorSet::of(130, 63)).first(), 64);
  a.clear();
  EXPECT_TRUE(a.empty());
}

TEST(ScheduleState, StoreAllPassesEachOutputOnAndRunsTheHeadBeforeTheFirstBackward) {
  const ModelConfig m = testing::small_model(Family::Gpt2, AttentionImpl::Naive, 0.1);
  BlockGraph g(m);
  const Schedule s = store_all_schedule(m.layers);
  ScheduleState st(g, s);
  TensorSet saved(g.tensors().size());
  for (std::size_t t = 0; t < g.tensors().size(); ++t)
    if (g.tensors()[t].saved) saved.insert(static_cast<int>(t));
  for (std::size_t i = 0; i < s.actions.size(); ++i) {
    const Action& a = s.actions[i];
    const ActionEffect e = st.apply(i, a);
    EXPECT_EQ(e.block, a.block);
    if (a.kind == ActionKind::Forward) {
      EXPECT_FALSE(e.recompute);
      EXPECT_TRUE(e.produces);
      EXPECT_EQ(e.live, TensorSet::of(g.tensors().size(), g.input()));
      EXPECT_TRUE(e.targets.has(g.output()));
      EXPECT_EQ(e.after, saved);
      EXPECT_EQ(e.steps.size(), g.steps().size());
      EXPECT_EQ(e.flops, g.flops_forward());
      EXPECT_EQ(st.block(a.block).device, saved);
      if (a.block + 1 < m.layers) EXPECT_TRUE(st.block(a.block + 1).device.has(g.input()));
      else EXPECT_TRUE(st.final_live());
    } else {
      EXPECT_EQ(e.head_first, a.block == m.layers - 1);
      EXPECT_EQ(e.flops, g.flops_backward());
      EXPECT_TRUE(st.head_done());
      EXPECT_FALSE(st.final_live());
      EXPECT_TRUE(st.block(a.block).reversed);
      EXPECT_TRUE(st.block(a.block).device.empty());
      EXPECT_EQ(st.next_backward(), a.block - 1);
    }
  }
  EXPECT_NO_THROW(st.finish(s.actions.size()));
}

TEST(ScheduleState, ACheckpointIsHeldUntilItsBackwardAndCounted) {
  const ModelConfig m = testing::small_model(Family::Llama, AttentionImpl::Flash, 0.0);
  BlockGraph g(m);
  Schedule s;
  s.blocks = m.layers;
  s.forward(0, Keep::input());
  s.forward(1, Keep::input());
  s.recompute(1, Keep::input());
  ScheduleState st(g, s);
  const ActionEffect f0 = st.apply(0, s.actions[0]);
  EXPECT_TRUE(f0.checkpoint);
  EXPECT_EQ(f0.after, TensorSet::of(g.tensors().size(), g.input()));
  EXPECT_TRUE(st.block(0).checkpoint);
  st.apply(1, s.actions[1]);
  EXPECT_EQ(st.checkpoints(), 2);
  const ActionEffect r1 = st.apply(2, s.actions[2]);  // nothing to rebuild
  EXPECT_TRUE(r1.recompute);
  EXPECT_TRUE(r1.checkpoint);
  EXPECT_TRUE(r1.steps.empty());
  EXPECT_EQ(r1.flops, 0u);
  EXPECT_EQ(st.checkpoints(), 2);
  try {
    st.finish(3);
    FAIL() << "accepted";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.index(), 3u);
    EXPECT_NE(std::string(e.what()).find("before block 2 is reversed"), std::string::npos) << e.what();
  }
  // A backward out of order is refused at its own index.
  try {
    st.apply(3, {ActionKind::Backward, 0, Keep::all()});
    FAIL() << "accepted";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.index(), 3u);
    EXPECT_NE(std::string(e.what()).find("block 2 must be reversed first"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace remat
