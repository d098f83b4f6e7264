// The peak of a recorded step under a plan (core/analysis/recorded_peak.h), on a timeline worked
// out by hand below.
#include <gtest/gtest.h>

#include "core/analysis/recorded_peak.h"
#include "core/analysis/recorded_plan.h"

namespace remat {
namespace {

RecordedTensor saved(std::string module, int block, std::uint64_t storage, std::uint64_t bytes, std::int64_t packed,
                     std::int64_t unpacked, std::int64_t released) {
  RecordedTensor t;
  t.module = std::move(module);
  t.block = block;
  t.storage = storage;
  t.storage_bytes = bytes;
  t.held_at_backward = true;
  t.packed_ns = packed;
  t.unpacked_ns = unpacked;
  t.released_ns = released;
  return t;
}

RecordedCall called(std::string module, int block, std::int64_t start, std::int64_t end,
                    std::vector<std::pair<std::uint64_t, std::uint64_t>> inputs) {
  RecordedCall c;
  c.module = std::move(module);
  c.block = block;
  c.forward = true;
  c.start_ns = start;
  c.end_ns = end;
  c.inputs = std::move(inputs);
  return c;
}

// Two blocks under "h"; times in ns. Parameters 1000 bytes at 0; the forward saves, in block 0,
// s1 (h.0.a, 300 B, saved at 10) and s2 (h.0, the block's input, 200 B, at 11); in block 1, s3
// (h.1.a, 400 B, at 20) and s5 (h.1.norm, block 1's input, 500 B, at 21); the head s4 (50 B, at
// 30). The backward: the head releases s4 at 52; block 1 first unpacks at 60, its gradients
// (400 B) arrive at 64, it releases s3 at 65 and s5 at 66; block 0 first unpacks at 75, its
// gradients (300 B) at 77, releases s1 at 78 and s2 at 79.
RecordedRun timeline() {
  RecordedRun r;
  r.blocks = 2;
  r.blocks_module = "h";
  r.saved_bytes = 1450;
  r.peak_bytes = 2800;
  r.tensors = {saved("h.0.a", 0, 1, 300, 10, 75, 78), saved("h.0", 0, 2, 200, 11, 76, 79),
               saved("h.1.a", 1, 3, 400, 20, 60, 65), saved("h.1.norm", 1, 5, 500, 21, 62, 66),
               saved("head", -1, 4, 50, 30, 51, 52)};
  r.calls = {called("h.0", 0, 9, 18, {{2, 200}}), called("h.1", 1, 19, 28, {{5, 500}})};
  // Tracked memory other than activations, and the activations' own events (which the replay
  // replaces by the tensors' times).
  r.events = {{0, 1000, false}, {10, 300, true}, {64, 400, false}, {77, 300, false}, {78, -300, true}};
  return r;
}

TEST(RecordedPeak, NoneReplaysTheRecordedStep) {
  // 1000 + 300 + 200 + 400 + 500 + 50 = 2450 at the forward's end; 2400 after the head's release;
  // + 400 B of gradients at 64 while s3 and s5 are still held: 2800.
  const RecordedPrediction p = predict_recorded_plan(timeline(), parse_checkpoint_plan("none"));
  EXPECT_EQ(p.recorded_peak_bytes, 2800u);
  EXPECT_EQ(p.held_peak_bytes, 2800u);
  EXPECT_EQ(p.peak_bytes, 2800u);
}

TEST(RecordedPeak, CheckpointsHoldTheirInputsAndTheRecomputeHoldsTheRegionUntilItsBackwardEnds) {
  // per-block: s4 held 30..52, block 0's input s2 from its call (9) to its region's last
  // release (79), block 1's input s5 from 19 to 66. Held: 1000 + 200 + 500 (+ 50 until 52) =
  // 1700, + 400 at 64 = 2100; then -500 at 66, + 300 at 77: 1900.
  const RecordedPrediction p = predict_recorded_plan(timeline(), parse_checkpoint_plan("per-block"));
  EXPECT_EQ(p.saved_bytes, 750u);
  EXPECT_EQ(p.held_peak_bytes, 2100u);
  // With the recompute: block 1's s3 (400 B; s5 is its input, held already) from its first
  // unpack (60) to 66: 1700 + 400 + 400 at 64 = 2500; block 0's s1 (300 B) from 75 to 79:
  // 1600 + 300 + 300 = 2200.
  EXPECT_EQ(p.peak_bytes, 2500u);
  // One segment of both blocks: only s2 held (9..79), so the peak is at the last gradients
  // (77); the recompute brings s1, s3 and s5 back at 60 until 79.
  const RecordedPrediction seg = predict_recorded_plan(timeline(), parse_checkpoint_plan("segments:1"));
  EXPECT_EQ(seg.saved_bytes, 250u);
  EXPECT_EQ(seg.held_peak_bytes, 1000u + 200 + 400 + 300);
  EXPECT_EQ(seg.peak_bytes, 1000u + 200 + (300 + 400 + 500) + 400 + 300);
}

TEST(RecordedPeak, AStepWithoutAutogradKeepsNoInputs) {
  const RecordedRun r = timeline();
  std::vector<PlanRegion> regions{{{"h.0"}, {&r.calls[0]}}, {{"h.1"}, {&r.calls[1]}}};
  // keep_inputs false: only the head's s4 is held (30..52); no recompute adds to the gradients.
  EXPECT_EQ(replay_peak(r, regions, false).held, 1000u + 400 + 300);
  EXPECT_EQ(replay_peak(r, regions, true).held, 2100u);
}

// A smaller step: parameters 1000 B at 0, nothing else tracked but what `tensors` saves.
RecordedRun small(std::vector<RecordedTensor> tensors, std::vector<RecordedCall> calls) {
  RecordedRun r;
  r.blocks = 2;
  r.blocks_module = "b";
  r.saved_bytes = 1;
  r.tensors = std::move(tensors);
  r.calls = std::move(calls);
  r.events = {{0, 1000, false}};
  return r;
}

TEST(RecordedPeak, ABlocksOutputIsRecomputedOnceTheNextCheckpointLetsItGo) {
  // Block 0 saves its output (storage 3, a ReLU's) which block 1 keeps as its checkpoint's
  // input until block 1's backward ends (63); block 0's recompute (70) makes it again.
  const RecordedRun r = small({saved("b.0.lin", 0, 2, 300, 11, 70, 72), saved("b.0.relu", 0, 3, 200, 12, 71, 73),
                               saved("b.1.lin", 1, 3, 200, 21, 60, 62), saved("b.1.relu", 1, 4, 200, 22, 61, 63)},
                              {called("b.0", 0, 10, 20, {{1, 100}}), called("b.1", 1, 21, 30, {{3, 200}})});
  const RecordedPrediction p = predict_recorded_plan(r, parse_checkpoint_plan("per-block"));
  EXPECT_EQ(p.held_peak_bytes, 1000u + 100 + 200);  // both inputs, 21..63
  // Block 1's recompute (60..63): its input is held, storage 4 comes back: 1500. Block 0's
  // (70..73): storages 2 and 3 come back over its input: 1000 + 100 + 300 + 200 = 1600.
  EXPECT_EQ(p.peak_bytes, 1600u);
}

TEST(RecordedPeak, AModuleCalledTwiceIsTwoCheckpoints) {
  // m runs at 10..20 (input storage 1) and 30..40 (input storage 2), saving 500 B each time.
  const RecordedRun r = small({saved("m", -1, 5, 500, 11, 80, 82), saved("m", -1, 6, 500, 31, 60, 62)},
                              {called("m", -1, 10, 20, {{1, 100}}), called("m", -1, 30, 40, {{2, 100}})});
  const RecordedPrediction p = predict_recorded_plan(r, parse_checkpoint_plan("modules:m"));
  // The second call's input lives to its own backward's end (62), not the first call's (82).
  EXPECT_EQ(p.held_peak_bytes, 1200u);
  // Each call's recompute brings back its own 500 B: 1000 + 100 + 100 + 500 at 60.
  EXPECT_EQ(p.peak_bytes, 1700u);
}

TEST(RecordedPeak, AStorageIdUsedAgainAfterItsReleaseIsANewLife) {
  const RecordedRun r = small({saved("x", -1, 9, 100, 5, -1, 8), saved("z", -1, 10, 1000, 20, -1, 30),
                               saved("y", -1, 9, 100, 50, -1, 55)},
                              {});
  const RecordedPrediction p = predict_recorded_plan(r, parse_checkpoint_plan("none"));
  EXPECT_EQ(p.held_peak_bytes, 2000u);  // storage 9 is not held from 5 to 55
  EXPECT_EQ(p.peak_bytes, 2000u);
}

}  // namespace
}  // namespace remat
