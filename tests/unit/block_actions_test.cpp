// block_actions: each block's actions in words, consecutive blocks that do the same together.
#include <gtest/gtest.h>

#include "core/analysis/block_actions.h"

namespace remat {
namespace {

TEST(BlockActions, GroupsConsecutiveBlocksThatDoTheSame) {
  Schedule s;
  s.blocks = 4;
  for (int b = 0; b < 3; ++b) s.forward(b, Keep::named({"block.in", "attn.qkv"}));
  s.forward(3, Keep::input());
  s.recompute(3, Keep::named({"block.in", "ln1.out"}));
  s.backward(3, Keep::named({"attn.probs"}));
  for (int b = 2; b >= 0; --b) s.backward(b, Keep::named({"ln1.out", "attn.probs"}));
  const std::vector<BlockActions> r = block_actions(s);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].first, 0);
  EXPECT_EQ(r[0].last, 2);
  EXPECT_EQ(r[0].actions, "forward keep=block.in,attn.qkv; backward rebuilding ln1.out,attn.probs");
  EXPECT_EQ(r[1].first, 3);
  EXPECT_EQ(r[1].last, 3);
  EXPECT_EQ(r[1].actions, "forward keep=input; recompute keep=block.in,ln1.out; backward rebuilding attn.probs");
}

TEST(BlockActions, APlainBackwardAndMovesReadAsTheyAre) {
  Schedule s;
  s.blocks = 2;
  s.forward(0);
  s.offload(0);
  s.forward(1);
  s.backward(1);
  s.prefetch(0, Keep::named({"attn.qkv"}));
  s.backward(0);
  const std::vector<BlockActions> r = block_actions(s);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].actions, "forward keep=all; offload; prefetch attn.qkv; backward");
  EXPECT_EQ(r[1].actions, "forward keep=all; backward");
}

}  // namespace
}  // namespace remat
