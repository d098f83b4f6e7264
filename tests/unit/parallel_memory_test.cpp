// Per-rank memory under tensor, sequence, pipeline and data parallelism: the per-rank block
// table against Korthikanti et al. 2022 Table 2, the regions it is derived from, the static bytes
// per rank with the ZeRO stages, the 1F1B stages, and the layout's refusals.
#include <gtest/gtest.h>

#include "core/engine/simulator.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "core/engine/pipeline_stage.h"
#include "core/engine/rank_prediction.h"
#include "core/engine/zero_shard.h"
#include "core/model/param_layout.h"
#include "core/graph/parallel_layout.h"
#include "core/model/model_source.h"
#include "core/util/error.h"
#include "policy_test_util.h"

namespace remat {
namespace {

using u64 = std::uint64_t;

// A GPT-2 block as the paper's: dropout everywhere, naive attention, 16-bit activations.
ModelConfig gpt(int s, int b, int h, int a, int layers = 4) {
  ModelConfig m;
  m.name = "paper-block";
  set_family(m, Family::Gpt2);
  m.layers = layers;
  m.hidden = h;
  m.heads = a;
  m.kv_heads = a;
  m.ffn = 4 * h;
  m.seq = s;
  m.positions = s;
  m.batch = b;
  m.vocab = 512;
  m.dropout = 0.1;
  m.attention = AttentionImpl::Naive;
  m.dtype = DType::BF16;
  m.validate();
  return m;
}

ParallelLayout tensor(int t, bool sp = false) {
  ParallelLayout p;
  p.tp = t;
  p.sp = sp;
  return p;
}

struct Shape {
  int s, b, h, a, t;
};
const Shape kShapes[] = {{64, 2, 128, 8, 2}, {128, 1, 256, 16, 4}, {32, 3, 96, 12, 4},
                         {2048, 1, 6144, 64, 8}, {2048, 1, 12288, 96, 8}};

TEST(ParallelMemory, TensorParallelBlockMatchesTable2) {
  for (const Shape& x : kShapes) {
    const u64 s = x.s, b = x.b, h = x.h, a = x.a, t = x.t, sbh = s * b * h;
    const ModelConfig m = gpt(x.s, x.b, x.h, x.a);
    SCOPED_TRACE("s " + std::to_string(s) + " b " + std::to_string(b) + " h " + std::to_string(h) +
                 " a " + std::to_string(a) + " t " + std::to_string(t));
    const BlockGraph tp = per_rank_graph(m, tensor(x.t));
    const BlockGraph tsp = per_rank_graph(m, tensor(x.t, true));
    // sbh(10 + 24/t + 5as/(ht)); sbh/t (34 + 5as/h)
    EXPECT_EQ(layer_activation_bytes(tp, Strategy::Store), 10 * sbh + 24 * sbh / t + 5 * a * s * s * b / t);
    EXPECT_EQ(layer_activation_bytes(tsp, Strategy::Store), (34 * sbh + 5 * a * s * s * b) / t);
    // Selective recomputation: sbh(10 + 24/t); with sequence parallelism sbh·34/t.
    EXPECT_EQ(layer_activation_bytes(tp, Strategy::Selective), 10 * sbh + 24 * sbh / t);
    EXPECT_EQ(layer_activation_bytes(tsp, Strategy::Selective), 34 * sbh / t);
    // Full recomputation: 2sbh, or 2sbh/t with the checkpoints distributed.
    // The distributed one is what a rank's walk holds (simulate with the layout): each block
    // but the last keeps its 1/t of its input.
    ParallelLayout dist = tensor(x.t);
    dist.distribute_saved_activations = true;
    EXPECT_EQ(layer_activation_bytes(tp, Strategy::Full), 2 * sbh);
    const Schedule full = test::plugins().plan(parse_policy_choice("uniform:segments=4"), tp);
    const Prediction d = simulate(tp, full, nullptr, dist);
    ASSERT_EQ(d.saved_bytes_per_block.size(), 4u);
    EXPECT_EQ(d.saved_bytes_per_block[0], 2 * sbh / t);
    // One rank (t = 1) is the model's own table: 34sbh + 5as²b.
    EXPECT_EQ(layer_activation_bytes(per_rank_graph(m, tensor(1)), Strategy::Store), 34 * sbh + 5 * a * s * s * b);
  }
}

TEST(ParallelMemory, SimulatedBlocksHoldTheTable2Bytes) {
  const Shape x{64, 2, 128, 8, 4};
  const u64 s = x.s, b = x.b, h = x.h, a = x.a, t = x.t, sbh = s * b * h;
  const ModelConfig m = gpt(x.s, x.b, x.h, x.a);
  struct Case {
    const char* policy;
    bool sp, distribute;
    u64 per_block;  // every block but the last (uniform keeps the last block's whole saved set)
  } cases[] = {
      {"none", false, false, 10 * sbh + 24 * sbh / t + 5 * a * s * s * b / t},
      {"none", true, false, (34 * sbh + 5 * a * s * s * b) / t},
      {"selective", false, false, 10 * sbh + 24 * sbh / t},
      {"selective", true, false, 34 * sbh / t},
      {"uniform:segments=4", false, false, 2 * sbh},
      {"uniform:segments=4", false, true, 2 * sbh / t},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.policy) + (c.sp ? " sp" : "") + (c.distribute ? " distributed" : ""));
    ParallelLayout p = tensor(x.t, c.sp);
    p.distribute_saved_activations = c.distribute;
    const BlockGraph g = per_rank_graph(m, p);
    const Schedule sch = test::plugins().plan(parse_policy_choice(c.policy), g);
    const Prediction pr = simulate(g, sch, nullptr, p);
    ASSERT_EQ(pr.saved_bytes_per_block.size(), 4u);
    for (int k = 0; k < 3; ++k) EXPECT_EQ(pr.saved_bytes_per_block[k], c.per_block) << "block " << k;
  }
}

// With sequence parallelism every block tensor is split over T, so every policy's plan of one
// rank holds exactly 1/T of what it holds on one device, block by block.
TEST(ParallelMemory, EveryPolicyPlansOneRanksBlocks) {
  const ModelConfig m = gpt(64, 2, 128, 8, 6);
  const BlockGraph full(m);
  const BlockGraph rank = per_rank_graph(m, tensor(4, true));
  for (const char* policy : {"none", "selective", "uniform", "revolve:snapshots=2", "offload",
                             "offload:what=checkpoints"}) {
    SCOPED_TRACE(policy);
    const Schedule one = test::plugins().plan(parse_policy_choice(policy), full);
    const Schedule per = test::plugins().plan(parse_policy_choice(policy), rank);
    EXPECT_EQ(schedule_to_json(per)["actions"].dump(), schedule_to_json(one)["actions"].dump());
    const Prediction a = simulate(full, one, nullptr), r = simulate(rank, per, nullptr);
    ASSERT_EQ(r.saved_bytes_per_block.size(), a.saved_bytes_per_block.size());
    for (std::size_t k = 0; k < a.saved_bytes_per_block.size(); ++k)
      EXPECT_EQ(4 * r.saved_bytes_per_block[k], a.saved_bytes_per_block[k]) << "block " << k;
    EXPECT_EQ(4 * r.host_peak_bytes, a.host_peak_bytes);  // offloaded block tensors
    EXPECT_GT(a.saved_bytes_per_block.back() + a.host_peak_bytes, 0u);
    EXPECT_EQ(r.block_forwards, a.block_forwards);
  }
  // The budget planner meets a per-rank budget with the rank's own simulated peak (which also
  // holds the embedding's tensors, not split, so its choices may differ from the device's).
  const u64 budget = full.saved_bytes();
  const Schedule per = test::plugins().plan(parse_policy_choice("budget"), rank, budget);
  EXPECT_LE(simulate(rank, per, nullptr).activation_peak_bytes, budget);
  EXPECT_GT(simulate(rank, test::plugins().plan(parse_policy_choice("none"), rank), nullptr).activation_peak_bytes,
            budget);
}

TEST(ParallelMemory, RegionsComeFromTheLinears) {
  const ModelConfig m = gpt(32, 1, 64, 4);
  const BlockGraph g(m);
  const BlockRegions r = block_regions(g);
  auto region = [&](const char* name) {
    const auto t = g.find(name);
    EXPECT_TRUE(t) << name;
    return t ? r.tensor[*t] : Region::Sequence;
  };
  for (const char* n : {"attn.qkv", "attn.probs", "attn.drop_mask", "attn.drop_out", "attn.ctx",
                        "mlp.gelu_in", "mlp.gelu_out"})
    EXPECT_EQ(region(n), Region::Tensor) << n;
  for (const char* n : {"block.in", "ln1.out", "attn.proj_out", "attn.res_mask", "ln2.in", "ln2.out",
                        "mlp.fc2_out", "mlp.res_mask", "block.out"})
    EXPECT_EQ(region(n), Region::Sequence) << n;
  for (std::size_t s = 0; s < g.steps().size(); ++s) {
    const std::string& n = g.steps()[s].name;
    EXPECT_EQ(r.row_parallel[s], n == "attn.proj" || n == "mlp.fc2") << n;
  }
  // A Llama block: RoPE and SwiGLU inside the parallel region, RMSNorms outside.
  ModelConfig l = test::tiny(Family::Llama, AttentionImpl::Flash);
  const BlockGraph lg(l);
  const BlockRegions lr = block_regions(lg);
  for (const char* n : {"attn.qkv_raw", "attn.qkv", "attn.lse", "mlp.gate_up", "mlp.act"})
    EXPECT_EQ(lr.tensor[*lg.find(n)], Region::Tensor) << n;
  for (const char* n : {"ln1.out", "ln2.in", "ln2.out", "mlp.down_out"})
    EXPECT_EQ(lr.tensor[*lg.find(n)], Region::Sequence) << n;
}

TEST(ParallelMemory, EachRankDoesItsShareOfTheWork) {
  const ModelConfig m = gpt(64, 2, 128, 8);
  const BlockGraph full(m);
  const BlockRegions r = block_regions(full);
  for (bool sp : {false, true}) {
    const BlockGraph g = per_rank_graph(m, tensor(4, sp));
    ASSERT_EQ(g.steps().size(), full.steps().size());
    for (std::size_t s = 0; s < full.steps().size(); ++s) {
      const StepDef& a = full.steps()[s];
      const StepDef& b = g.steps()[s];
      SCOPED_TRACE(a.name + (sp ? " sp" : ""));
      if (a.kind == StepKind::Gemm && r.row_parallel[s]) {
        // The row-parallel bias is added once to the reduced output, on every rank.
        EXPECT_EQ(4 * (b.flops_fwd - a.bias_mn()), a.flops_fwd - a.bias_mn());
      } else if (a.kind == StepKind::Gemm || r.step[s] == Region::Tensor || sp) {
        EXPECT_EQ(4 * b.flops_fwd, a.flops_fwd);
        EXPECT_EQ(4 * b.flops_bwd, a.flops_bwd);
      } else {
        EXPECT_EQ(b.flops_fwd, a.flops_fwd);
      }
    }
  }
}

// Parameters of a GPT-2 rank counted by hand: column-parallel q|k|v and fc with their biases,
// row-parallel proj and fc2 split over t (their biases whole), the norms whole, the embedding
// whole (replicated over the tensor-parallel ranks).
u64 gpt_rank_params(const ModelConfig& m, u64 t, int blocks, bool first, bool last) {
  const u64 h = m.hidden, V = m.vocab, pos = m.positions;
  const u64 block = 12 * h * h / t + 7 * h / t + 2 * h + 4 * h;
  u64 n = blocks * block;
  if (first) n += V * h + pos * h;
  if (last) n += 2 * h + (first ? 0 : V * h);  // final norm, the tied head's copy
  return n;
}

TEST(ParallelMemory, StaticBytesPerRank) {
  const ModelConfig m = gpt(64, 1, 128, 8, 8);
  ParallelLayout p = tensor(4);
  p.pp = 4;
  for (int st = 0; st < 4; ++st) {
    const u64 n = gpt_rank_params(m, 4, 2, st == 0, st == 3);
    const RankStatic r = rank_static(m, p, st);
    EXPECT_EQ(r.param_elements, n) << "stage " << st;
    EXPECT_EQ(r.total(), 16 * n) << "stage " << st;  // bf16 params + grads, fp32 master + 2 moments
  }
  // One rank of everything is the model's own count.
  EXPECT_EQ(rank_param_elements(m, ParallelLayout{}, 0), static_cast<u64>(ParamLayout(m).total()));
  // The ZeRO stages divide the flat buffers by D (rounded up).
  p.dp = 3;
  const u64 n = gpt_rank_params(m, 4, 2, false, false), nd = (n + 2) / 3;
  const u64 want[4][4] = {{2 * n, 2 * n, 4 * n, 8 * n}, {2 * n, 2 * n, 4 * nd, 8 * nd},
                          {2 * n, 2 * nd, 4 * nd, 8 * nd}, {2 * nd, 2 * nd, 4 * nd, 8 * nd}};
  for (int z = 0; z <= 3; ++z) {
    p.zero = z;
    const RankStatic r = rank_static(m, p, 1);
    EXPECT_EQ(r.parameters, want[z][0]) << "zero " << z;
    EXPECT_EQ(r.gradients, want[z][1]) << "zero " << z;
    EXPECT_EQ(r.master_weights, want[z][2]) << "zero " << z;
    EXPECT_EQ(r.optimizer_state, want[z][3]) << "zero " << z;
  }
}

TEST(ParallelMemory, StaticBytesOfAMiddleStageAreAbout16PhiOverTP) {
  const ModelConfig m = resolve_model("megatron-175b");
  ParallelLayout p = tensor(8);
  p.pp = 8;
  const double phi = static_cast<double>(ParamLayout(m).total());
  const double got = static_cast<double>(rank_static(m, p, 3).total());
  EXPECT_NEAR(got / (16.0 * phi / 64.0), 1.0, 0.01);
  EXPECT_LT(got, 16.0 * phi / 64.0);  // the middle stages hold no embeddings
}

TEST(ParallelMemory, LlamaRankSplitsEverythingButTheNorms) {
  ModelConfig m = test::tiny(Family::Llama, AttentionImpl::Flash, 4);
  m.tied_embeddings = false;
  ParallelLayout p = tensor(2);
  p.pp = 2;
  const u64 h = m.hidden, q = m.q_width(), kv = m.kv_width(), f = m.ffn, V = m.vocab;
  const u64 block = (h * (q + 2 * kv) + q * h + 3 * f * h) / 2 + 2 * h;
  EXPECT_EQ(rank_param_elements(m, p, 0), 2 * block + V * h);
  EXPECT_EQ(rank_param_elements(m, p, 1), 2 * block + V * h + h);
}

TEST(ParallelMemory, FirstStageHoldsPMicroBatches) {
  const ModelConfig m = gpt(64, 1, 128, 8, 8);
  ParallelLayout p = tensor(2, true);
  p.pp = 4;
  p.micro_batches = 8;
  const RankPrediction r = predict_ranks(
      m, p, [](const BlockGraph& g) { return test::plugins().plan(parse_policy_choice("none"), g); }, nullptr);
  ASSERT_EQ(r.stages.size(), 4u);
  ASSERT_EQ(r.micro_batch.size(), 1u);
  const MicroBatchPrediction& mb = r.micro_batch[0];
  const u64 per_block = layer_activation_bytes(per_rank_graph(m, p), Strategy::Store);
  EXPECT_EQ(mb.held_bytes, 2 * per_block);
  for (const StagePrediction& s : r.stages) {
    EXPECT_EQ(s.in_flight, 4 - s.stage);
    // The stage's whole 1F1B step walked (simulate_stage), as a run executes it.
    const Prediction w = simulate_stage(m, p, s.stage, mb.schedule, nullptr);
    EXPECT_EQ(s.peak_bytes, w.peak_bytes) << "stage " << s.stage;
    EXPECT_EQ(s.activation_bytes, w.activation_peak_bytes) << "stage " << s.stage;
    // It holds in-flight micro-batches' saved sets at once, and its static bytes.
    EXPECT_GE(s.activation_bytes, s.in_flight * mb.held_bytes) << "stage " << s.stage;
    EXPECT_GE(s.peak_bytes, s.statics.total() + s.activation_bytes) << "stage " << s.stage;
    // The outline (one micro-batch simulated, the others' held sets added) is within one
    // micro-batch's boundary tensors of the walk: the embedding or head a stage lacks, the
    // sends and receives in flight.
    const u64 outline = s.statics.total() + (s.in_flight - 1) * mb.held_bytes + mb.sim.peak_bytes -
                        mb.sim.static_bytes;
    const u64 diff = outline > s.peak_bytes ? outline - s.peak_bytes : s.peak_bytes - outline;
    EXPECT_LT(diff, mb.held_bytes / 4) << "stage " << s.stage << ": walk " << s.peak_bytes << ", outline " << outline;
  }
  EXPECT_EQ(r.peak_stage, 0);
  // The first stage holds P micro-batches' blocks at once: at least P x held.
  EXPECT_GE(r.stages[0].activation_bytes, 4 * mb.held_bytes);
}

TEST(ParallelMemory, ZeroShardsEachStagesOwnParameters) {
  // Each stage's walk under ZeRO 0..3 over D = 2: its static bytes are the stage's shares
  // (rank_static, from the element counts). ZeRO-1 and ZeRO-3 lower the peak; ZeRO-2 trades
  // the gradients' half for its buckets (the outer one, open all step, and a block's).
  ModelConfig m = gpt(32, 1, 64, 4, 4);
  m.dtype = DType::F32;  // no master weights
  m.tied_embeddings = true;
  ParallelLayout p;
  p.pp = 2;
  p.dp = 2;
  p.micro_batches = 2;
  for (const char* policy : {"none", "uniform:segments=2"}) {
    std::vector<std::vector<u64>> peak(4, std::vector<u64>(2, 0));
    for (int z = 0; z <= 3; ++z) {
      p.zero = z;
      for (int stage = 0; stage < 2; ++stage) {
        const BlockGraph g = per_rank_graph(m, p, stage);
        const Schedule s = test::plugins().plan(parse_policy_choice(policy), g);
        const Prediction w = simulate_stage(m, p, stage, s, nullptr);
        const RankStatic st = rank_static(m, p, stage);
        EXPECT_EQ(w.static_bytes, st.total()) << policy << " zero " << z << " stage " << stage;
        const u64 n = rank_param_elements(m, p, stage), c = (n + 1) / 2;
        const u64 want = 4 * ((z >= 3 ? c : n) + (z >= 2 ? c : n) + 2 * (z >= 1 ? c : n));
        EXPECT_EQ(w.static_bytes, want) << policy << " zero " << z << " stage " << stage;
        peak[z][stage] = w.peak_bytes;
        if (z != 2) continue;
        const ParamLayout L(stage_rank_model(m, p, stage), stage_cut(m, p, stage).parts);
        u64 block = 0;
        for (int b = 0; b < p.stage_layers(m, stage); ++b)
          block = std::max<u64>(block, zero_block_bucket(L, b).numel());
        const u64 buckets = 4 * (zero_outer_bucket(L).numel() + block);
        const u64 z1 = peak[1][stage];
        EXPECT_GT(w.peak_bytes + 4 * (n - c), z1) << policy << " stage " << stage;
        EXPECT_LE(w.peak_bytes + 4 * (n - c), z1 + buckets) << policy << " stage " << stage;
      }
    }
    for (int stage = 0; stage < 2; ++stage) {
      EXPECT_LT(peak[1][stage], peak[0][stage]) << policy << " stage " << stage;
      EXPECT_LT(peak[3][stage], peak[2][stage]) << policy << " stage " << stage;
    }
  }
}

TEST(ParallelMemory, UnevenFirstAndLastStages) {
  const ModelConfig m = gpt(32, 1, 64, 4, 10);
  ParallelLayout p;
  p.pp = 4;
  p.first_stage_layers = 2;
  p.last_stage_layers = 2;
  validate_layout(p, m);
  EXPECT_EQ(p.stage_layers(m, 0), 2);
  EXPECT_EQ(p.stage_layers(m, 1), 3);
  EXPECT_EQ(p.stage_first_block(m, 3), 8);
  const RankPrediction r = predict_ranks(
      m, p, [](const BlockGraph& g) { return test::plugins().plan(parse_policy_choice("none"), g); }, nullptr);
  EXPECT_EQ(r.micro_batch.size(), 2u);  // 2-block and 3-block stages
  p.first_stage_layers = 3;
  EXPECT_THROW(validate_layout(p, m), ConfigError);  // 5 layers left for 2 stages
}

TEST(ParallelMemory, DistributedCheckpointsNeedFullRecomputation) {
  const ModelConfig m = gpt(32, 1, 64, 4);
  ParallelLayout p = tensor(2);
  p.distribute_saved_activations = true;
  auto plan_with = [](const char* policy) {
    return [policy](const BlockGraph& g) { return test::plugins().plan(parse_policy_choice(policy), g); };
  };
  EXPECT_THROW(predict_ranks(m, p, plan_with("none"), nullptr), ConfigError);
  EXPECT_NO_THROW(predict_ranks(m, p, plan_with("uniform:segments=4"), nullptr));
}

std::string refusal(const ModelConfig& m, const ParallelLayout& p) {
  try {
    validate_layout(p, m);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(ParallelMemory, LayoutsTheModelCannotTakeAreRefusedWithTheNumbers) {
  ModelConfig m = gpt(32, 2, 96, 12, 6);
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(refusal(m, tensor(8)), "heads 12 is not divisible by tp 8")) << refusal(m, tensor(8));
  ModelConfig g = m;
  g.kv_heads = 6;
  g.family = Family::Llama;
  EXPECT_TRUE(has(refusal(g, tensor(4)), "kv-heads 6 is not divisible by tp 4")) << refusal(g, tensor(4));
  ModelConfig f = m;
  f.ffn = 390;
  EXPECT_TRUE(has(refusal(f, tensor(4)), "ffn 390")) << refusal(f, tensor(4));
  ModelConfig v = m;
  v.vocab = 510;
  EXPECT_TRUE(has(refusal(v, tensor(4)), "vocab 510")) << refusal(v, tensor(4));
  ParallelLayout p;
  p.pp = 4;
  EXPECT_TRUE(has(refusal(m, p), "layers 6 is not divisible by pp 4")) << refusal(m, p);
  p.pp = 3;
  p.micro_batches = 2;
  EXPECT_TRUE(has(refusal(m, p), "2 micro-batches are fewer than the 3 pipeline stages")) << refusal(m, p);
  p = {};
  p.dp = 4;
  p.global_batch = 6;
  EXPECT_TRUE(has(refusal(m, p), "global batch 6 is not divisible by dp 4")) << refusal(m, p);
  p.global_batch = 12;  // 3 per replica, micro-batch 2
  EXPECT_TRUE(has(refusal(m, p), "is not divisible by the micro-batch size 2")) << refusal(m, p);
  p.global_batch = 16;
  EXPECT_EQ(refusal(m, p), "accepted");
  EXPECT_EQ(p.micro_batches_of(m), 2);
  p = {};
  p.sp = true;
  EXPECT_TRUE(has(refusal(m, p), "sequence parallelism needs tp > 1")) << refusal(m, p);
  p = {};
  p.zero = 4;
  EXPECT_TRUE(has(refusal(m, p), "zero: must be 0, 1, 2 or 3, got 4")) << refusal(m, p);
  p = tensor(4, true);
  p.distribute_saved_activations = true;
  EXPECT_TRUE(has(refusal(m, p), "cannot be combined with sequence parallelism")) << refusal(m, p);
  ModelConfig s = m;
  s.seq = s.positions = 30;
  EXPECT_TRUE(has(refusal(s, tensor(4, true)), "sequence length 30 is not divisible by tp 4"));
}

TEST(ParallelMemory, PaperStrategiesAsPercentOfTheBaseline) {
  const ModelConfig m = resolve_model("megatron-22b");
  ParallelLayout p = tensor(8);
  const std::vector<StrategyRow> rows = paper_strategies(m, p);
  ASSERT_EQ(rows.size(), 5u);
  const u64 s = 2048, h = 6144, a = 64, t = 8, sbh = s * h, L = 48;
  const u64 base = 10 * sbh + 24 * sbh / t + 5 * a * s * s / t;
  EXPECT_EQ(rows[0].first_stage_bytes, L * base);
  EXPECT_EQ(rows[1].layer_bytes, (34 * sbh + 5 * a * s * s) / t);
  EXPECT_EQ(rows[2].layer_bytes, 10 * sbh + 24 * sbh / t);
  EXPECT_EQ(rows[3].layer_bytes, 34 * sbh / t);
  EXPECT_EQ(rows[4].layer_bytes, 2 * sbh);
  EXPECT_DOUBLE_EQ(rows[0].percent, 100.0);
  EXPECT_NEAR(rows[3].percent, 100.0 * (34.0 / 8) / (10 + 3 + 5.0 * 64 * 2048 / (6144.0 * 8)), 1e-9);
  // 530B: 105 blocks on 35 stages, 3 each, 35 micro-batches in flight on the first.
  const ModelConfig big = resolve_model("megatron-530b");
  ParallelLayout q = tensor(8);
  q.pp = 35;
  const std::vector<StrategyRow> r530 = paper_strategies(big, q);
  EXPECT_EQ(r530[4].first_stage_bytes, 35ull * 3 * 2 * 2048 * 20480);
}

}  // namespace
}  // namespace remat
