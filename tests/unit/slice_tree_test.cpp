// The op timeline's slice levels (step > phase > block > op > kernel), their nesting and the
// memory an op allocated and freed, on small hand-made steps.
#include <gtest/gtest.h>

#include "core/analysis/slice_tree.h"

namespace remat {
namespace {

OpRecord op(std::int64_t s, std::int64_t e, Phase p, int block, const char* name, std::uint64_t id,
            Stream st = Stream::Compute) {
  OpRecord o;
  o.start_ns = s;
  o.end_ns = e;
  o.phase = p;
  o.block = block;
  o.name = name;
  o.op = name;
  o.op_id = id;
  o.stream = st;
  o.step = 2;
  o.flops = 10 * id;
  o.bytes = id;
  return o;
}

// embedding, block 0 (2 ops), block 1 (1 op) forward; block 1, block 0 backward; optimizer.
Trace cpu_step() {
  Trace t;
  t.device = "cpu";
  t.ops = {op(0, 10, Phase::Forward, -1, "embedding", 1),       op(10, 20, Phase::Forward, 0, "h0.a", 2),
           op(20, 30, Phase::Forward, 0, "h0.b", 3),            op(30, 40, Phase::Forward, 1, "h1.a", 4),
           op(40, 55, Phase::Backward, 1, "h1.a", 5),           op(55, 70, Phase::Backward, 0, "h0.b", 6),
           op(70, 80, Phase::Optimizer, -1, "adamw", 7),        op(12, 18, Phase::Forward, 0, "offload", 8, Stream::CopyToHost)};
  StepStats st;
  st.step = 2;
  st.start_ns = -5;
  st.end_ns = 90;
  t.step_stats = {st};
  return t;
}

TEST(SliceTree, CpuLevelsAreStepPhaseBlockOpAndOneTrackPerOtherStream) {
  const Trace t = cpu_step();
  const SliceTree tree(t);
  ASSERT_EQ(tree.tracks().size(), 5u);
  EXPECT_EQ(tree.tracks()[0].level, SliceLevel::Step);
  EXPECT_EQ(tree.tracks()[1].level, SliceLevel::Phase);
  EXPECT_EQ(tree.tracks()[2].level, SliceLevel::Block);
  EXPECT_EQ(tree.tracks()[3].level, SliceLevel::Op);
  EXPECT_EQ(tree.tracks()[4].stream, Stream::CopyToHost);
  EXPECT_FALSE(tree.has_kernels());

  const auto& step = tree.tracks()[0].slices;
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].start, -5);  // from the step figures
  EXPECT_EQ(step[0].end, 90);
  EXPECT_EQ(tree.name(t, 0, 0), "step 2");

  const auto& phase = tree.tracks()[1].slices;
  ASSERT_EQ(phase.size(), 3u);
  EXPECT_EQ(tree.name(t, 1, 0), "forward");
  EXPECT_EQ(phase[0].start, 0);
  EXPECT_EQ(phase[0].end, 40);
  EXPECT_EQ(phase[1].start, 40);
  EXPECT_EQ(phase[1].end, 70);
  EXPECT_EQ(tree.name(t, 1, 2), "optimizer");

  // Block 1 in the forward and block 1 in the backward are two slices: a phase bounds a block.
  const auto& block = tree.tracks()[2].slices;
  ASSERT_EQ(block.size(), 4u);
  EXPECT_EQ(block[0].block, 0);
  EXPECT_EQ(block[0].start, 10);
  EXPECT_EQ(block[0].end, 30);
  EXPECT_EQ(block[0].last - block[0].first, 2u);
  EXPECT_EQ(block[1].block, 1);
  EXPECT_EQ(block[2].block, 1);
  EXPECT_EQ(block[1].parent, 0u);
  EXPECT_EQ(block[2].parent, 1u);
  EXPECT_EQ(tree.name(t, 2, 3), "block 0");

  const auto& ops = tree.tracks()[3].slices;
  ASSERT_EQ(ops.size(), 7u);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const OpRecord& o = t.ops[tree.stream_ops(Stream::Compute)[ops[i].first]];
    EXPECT_EQ(ops[i].start, o.start_ns);
    EXPECT_EQ(ops[i].end, o.end_ns);
    EXPECT_EQ(ops[i].last, ops[i].first + 1);
  }
  EXPECT_EQ(tree.name(t, 3, 1), "h0.a");
  EXPECT_EQ(tree.flops(t, 2, 0), 50u);  // ops 2 and 3
  EXPECT_EQ(tree.bytes(t, 1, 0), 10u);  // ops 1..4

  // Every slice lies inside its parent.
  for (std::size_t tr = 1; tr < 4; ++tr) {
    const std::size_t up = tr == 1 ? 0 : 1;  // phases in the step; blocks and ops in a phase
    for (const Slice& s : tree.tracks()[tr].slices) {
      ASSERT_NE(s.parent, Slice::kNone);
      const Slice& p = tree.tracks()[up].slices[s.parent];
      EXPECT_LE(p.start, s.start);
      EXPECT_GE(p.end, s.end);
      EXPECT_LE(p.first, s.first);
      EXPECT_GE(p.last, s.last);
    }
  }
  EXPECT_EQ(tree.leaf_track(Stream::Compute), 3);
  EXPECT_EQ(tree.leaf_of(7), std::make_pair(4, 0));
  EXPECT_EQ(tree.leaf_of(3), std::make_pair(3, 3));
  EXPECT_EQ(tree.leaf_of(99), std::make_pair(-1, -1));
  EXPECT_EQ(tree.span_rows().rows(), 5u);
  EXPECT_EQ(tree.span_rows().size(), 1u + 3 + 4 + 7 + 1);
}

TEST(SliceTree, CudaKernelsOfOneOpIdFormOneOpSlice) {
  Trace t;
  t.device = "cuda";
  t.ops = {op(0, 5, Phase::Forward, 0, "gemm", 10), op(6, 9, Phase::Forward, 0, "softmax_kernel", 10),
           op(10, 12, Phase::Forward, 0, "gemm", 10), op(13, 20, Phase::Forward, 0, "gemm", 11),
           op(21, 30, Phase::Backward, 0, "gemm", 12)};
  for (auto& o : t.ops) o.op = o.op_id == 11 ? "mlp.fc" : "attn.softmax";
  const SliceTree tree(t);
  ASSERT_TRUE(tree.has_kernels());
  ASSERT_EQ(tree.tracks().size(), 5u);
  EXPECT_EQ(tree.tracks()[3].level, SliceLevel::Op);
  EXPECT_EQ(tree.tracks()[4].level, SliceLevel::Kernel);
  const auto& ops = tree.tracks()[3].slices;
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].start, 0);
  EXPECT_EQ(ops[0].end, 12);
  EXPECT_EQ(ops[0].last - ops[0].first, 3u);
  EXPECT_EQ(tree.name(t, 3, 0), "h0.attn.softmax");
  EXPECT_EQ(tree.name(t, 3, 1), "h0.mlp.fc");
  const auto& k = tree.tracks()[4].slices;
  ASSERT_EQ(k.size(), 5u);
  EXPECT_EQ(k[1].parent, 0u);
  EXPECT_EQ(k[3].parent, 1u);
  EXPECT_EQ(k[4].parent, 2u);
  EXPECT_EQ(tree.name(t, 4, 1), "softmax_kernel");
  EXPECT_EQ(tree.leaf_track(Stream::Compute), 4);
}

// A profiler's host ops: an op, the ops it calls inside it (one of them an instant at its very
// end, as whole microseconds write it) and one of theirs; then a sibling that starts where the
// first ends.
TEST(SliceTree, NestedHostOpsLieOneTrackLowerPerOpAroundThem) {
  Trace t;
  t.device = "cpu";
  t.ops = {op(0, 100, Phase::Forward, -1, "aten::linear", 1, Stream::Host),
           op(5, 40, Phase::Forward, -1, "aten::t", 2, Stream::Host),
           op(10, 20, Phase::Forward, -1, "aten::transpose", 3, Stream::Host),
           op(50, 90, Phase::Forward, -1, "aten::addmm", 4, Stream::Host),
           op(100, 100, Phase::Forward, -1, "aten::detach", 5, Stream::Host),
           op(100, 150, Phase::Backward, -1, "MmBackward0", 6, Stream::Host)};
  const SliceTree tree(t);
  ASSERT_EQ(tree.tracks().size(), 3u);
  for (std::uint32_t d = 0; d < 3; ++d) {
    EXPECT_EQ(tree.tracks()[d].stream, Stream::Host);
    EXPECT_EQ(tree.tracks()[d].depth, d);
  }
  auto names = [&](int track) {
    std::vector<std::string> v;
    for (std::size_t i = 0; i < tree.tracks()[static_cast<std::size_t>(track)].slices.size(); ++i)
      v.push_back(tree.name(t, track, static_cast<int>(i)));
    return v;
  };
  EXPECT_EQ(names(0), (std::vector<std::string>{"aten::linear", "MmBackward0"}));
  EXPECT_EQ(names(1), (std::vector<std::string>{"aten::t", "aten::addmm", "aten::detach"}));
  EXPECT_EQ(names(2), (std::vector<std::string>{"aten::transpose"}));
  EXPECT_EQ(tree.leaf_of(2), std::make_pair(2, 0));
  EXPECT_EQ(tree.leaf_of(4), std::make_pair(1, 2));
  EXPECT_EQ(tree.leaf_of(5), std::make_pair(0, 1));
  EXPECT_EQ(tree.flops(t, 1, 1), 40u);
  EXPECT_EQ(tree.span_rows().rows(), 3u);
}

TEST(SliceTree, EmptyTraceHasNoTracks) {
  const Trace t;
  const SliceTree tree(t);
  EXPECT_TRUE(tree.tracks().empty());
  EXPECT_EQ(tree.leaf_track(Stream::Compute), -1);
  EXPECT_EQ(tree.name(t, 0, 0), "");
}

TEST(OpMemoryIndex, SumsTheStepsEventsByOpId) {
  Trace t;
  auto ev = [&](std::int64_t delta, std::uint64_t op) {
    MemoryEvent e;
    e.delta = delta;
    e.op_seq = op;
    t.events.push_back(e);
  };
  ev(100, 1);  // before the step
  t.step_first_event = t.events.size();
  ev(64, 3);
  ev(32, 2);
  ev(-64, 3);
  ev(16, 5);
  ev(-16, 5);
  t.step_end_event = t.events.size();
  ev(999, 3);  // after the step
  const OpMemoryIndex m(t);
  const OpMemory a = m.between(3, 3);
  EXPECT_EQ(a.allocated, 64u);
  EXPECT_EQ(a.freed, 64u);
  EXPECT_EQ(a.allocations, 1u);
  EXPECT_EQ(a.frees, 1u);
  const OpMemory b = m.between(2, 5);
  EXPECT_EQ(b.allocated, 112u);
  EXPECT_EQ(b.freed, 80u);
  EXPECT_EQ(m.between(4, 4).allocations, 0u);
  EXPECT_EQ(m.between(1, 1).allocated, 0u);
  EXPECT_EQ(m.between(5, 2).allocated, 0u);
}

}  // namespace
}  // namespace remat
