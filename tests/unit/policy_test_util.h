// Shared by the policy tests: the loaded plugins, tiny models, a real CPU run, and figures
// counted from a run's own records.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/run.h"
#include "core/engine/simulator.h"
#include "core/plugin/registry.h"
#include "core/util/error.h"
#include "core/profiler/host_profiler.h"

namespace remat::test {

// The real plugins, from the build's plugin directory (bin/plugins next to the test binary).
inline PolicyRegistry& plugins() {
  static PolicyRegistry* reg = [] {
    auto* r = new PolicyRegistry();
    r->load_dirs({std::string(REMAT_BUILD_DIR) + "/bin/plugins"});
    return r;
  }();
  return *reg;
}

inline Schedule plan(const std::string& policy, const ModelConfig& m,
                     std::optional<std::uint64_t> budget = std::nullopt) {
  return plugins().plan(parse_policy_choice(policy), m, budget);
}

// The same plan made by the plugin's plan() in this process: the registry's parameter check,
// then the policy created here (create_policy_in_process) instead of in a child process with a
// JSON round trip. For tests that plan hundreds of times and check each schedule themselves
// (the child process, the round trip and the registry's validation have tests of their own).
inline Schedule plan_here(const std::string& policy, const ModelConfig& m) {
  const PolicyChoice c = parse_policy_choice(policy);
  const LoadedPolicy* lp = plugins().find(c.name);
  if (!lp) throw Error("no policy '" + c.name + "' among the built plugins");
  const BlockGraph g(m);
  PlanContext ctx;
  ctx.model = &m;
  ctx.graph = &g;
  ctx.blocks = m.layers;
  ctx.params = plugins().check_params(*lp, c.params, &g);
  for (const auto& st : g.steps()) ctx.step_cost.push_back(static_cast<double>(st.flops_fwd));
  return create_policy_in_process(*lp)->plan(ctx);
}

// 4 blocks, h=64, 4 heads, s=32, b=2, vocab 256, dropout 0.1; the RoPE families with 2 KV heads.
inline ModelConfig tiny(Family arch, AttentionImpl attn, int layers = 4) {
  ModelConfig m;
  m.name = "policy-test";
  set_family(m, arch);
  m.layers = layers;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = arch == Family::Gpt2 || arch == Family::GptNeox ? 4 : 2;
  m.ffn = arch == Family::Gpt2 || arch == Family::GptNeox ? 256 : 176;
  if (arch == Family::GptNeox) m.partial_rotary = 0.25;  // Pythia's quarter of each head
  if (arch == Family::Falcon) m.kv_heads = 1;             // multi-query
  if (arch == Family::Gemma3) m.sliding_window = 12, m.window_pattern = 2;  // blocks 1, 3 global
  if (arch == Family::SmolLM3) {  // every fourth block without RoPE (block 3): a table of its own
    LayerKind nope{"full_attention_no_rope"};
    nope.rope = false;
    m.layer_kinds = {LayerKind{"full_attention"}, nope};
    m.layer_pattern = {0, 0, 0, 1};
  }
  if (arch == Family::Mixtral) m.moe = MoeConfig{4, 2, 48};  // every layer, dropless
  if (arch == Family::GptOss) {  // sinks, windows on blocks 0 and 2, biased router and experts, a clamp that bites,
                                 // the load-balancing loss
    m.moe = MoeConfig{4, 2, 48, true};
    m.moe.expert_bias = m.moe.router_bias = true;
    m.sliding_window = 12;
    m.swiglu_limit = 0.02;
    m.moe.aux_loss_coef = 0.02;  // the load-balancing loss too
  }
  if (arch == Family::Llama4) {  // Llama 4: chunks of 6 and the L2 norm on blocks 0-2 (RoPE, adjacent pairs), block 3
                                 // without RoPE and temperature-tuned from position 3; experts on blocks 1 and 3,
                                 // top-1 sigmoid weighting their input, a shared expert
    m.moe = MoeConfig{4, 1, 32};
    m.moe.sigmoid = m.moe.weight_input = true;
    m.moe.shared_ffn = 32;
    LayerKind chunked{"chunked_attention+dense_mlp"}, chunked_moe{"chunked_attention+moe"},
        nope{"full_attention_no_rope+moe"};
    chunked.chunk = chunked_moe.chunk = 6;
    chunked_moe.mlp = nope.mlp = LayerMlp::Moe;
    nope.rope = false;
    m.layer_kinds = {chunked, chunked_moe, nope};
    m.layer_pattern = {0, 1, 0, 2};
    m.attn_temperature_floor = 4;
    m.attn_temperature_scale = 0.5;
  }
  if (arch == Family::Qwen2Moe) {  // a gated shared expert; DeepSeek-V3's router (sigmoid, bias, 4 groups, scaled)
    m.moe = MoeConfig{8, 2, 24, true, 0.0, 40, true};
    m.moe.sigmoid = m.moe.score_bias = true;
    m.moe.groups = 4, m.moe.topk_groups = 2, m.moe.scaling = 2.5;
  }
  if (arch == Family::Qwen3Moe) {  // 8 experts, top-2 renormalised, capacity 1 (tokens dropped), block 1 dense
    m.moe = MoeConfig{8, 2, 32, true, 1.0};
    LayerKind moe{"sparse"};
    moe.mlp = LayerMlp::Moe;
    m.layer_kinds = {moe, LayerKind{"dense"}};
    m.layer_pattern = {0, 1, 0, 0};
  }
  if (arch == Family::DeepseekV3) {  // latent attention with a q rank, d 16 and dv 10; V3's router; block 0 dense
    m.kv_heads = 4;
    m.mla = MlaConfig{24, 32, 12, 4, 10};
    m.attn_scale = 0.3;
    m.moe = MoeConfig{8, 2, 24, true, 0.0, 24};
    m.moe.sigmoid = m.moe.score_bias = true;
    m.moe.groups = 4, m.moe.topk_groups = 2, m.moe.scaling = 2.5;
    LayerKind dense{"dense"};
    LayerKind moe{"sparse"};
    moe.mlp = LayerMlp::Moe;
    m.layer_kinds = {dense, moe};
    m.layer_pattern = {0, 1, 1, 1};
  }
  if (arch == Family::DeepseekV2) {  // latent attention with a plain q, d 16 and dv 20 (wider); V2's group-max router
    m.kv_heads = 4;
    m.mla = MlaConfig{0, 24, 8, 8, 20};
    m.moe = MoeConfig{8, 2, 24, false, 0.0, 48};
    m.moe.groups = 4, m.moe.topk_groups = 2, m.moe.group_max = true, m.moe.scaling = 1.7;
  }
  if (arch == Family::Qwen2) {  // as Qwen2.5's small models: tied, dropout on the probabilities only
    m.tied_embeddings = true;
    m.dropout_sites = kDropAttention;
  }
  if (arch == Family::Mistral || arch == Family::Gemma2) m.sliding_window = 12;  // banded at seq 32
  if (arch == Family::Gemma2) m.attn_softcap = 3.0, m.final_softcap = 4.0;       // caps that bite
  if (arch == Family::Granite) {  // Granite 3's multipliers
    m.attn_scale = 1.0 / 16.0;
    m.embedding_multiplier = 12.0;
    m.residual_multiplier = 0.22;
    m.logits_scaling = 16.0;
  }
  m.seq = 32;
  m.positions = 32;
  m.batch = 2;
  m.vocab = 256;
  m.dropout = 0.1;
  m.attention = attn;
  return m;
}

// tiny() with the given dropout rate.
inline ModelConfig tiny(Family arch, AttentionImpl attn, double dropout, int layers) {
  ModelConfig m = tiny(arch, attn, layers);
  m.dropout = dropout;
  return m;
}

// Forward FLOPs of each step of g: the step costs a plan gets by default.
inline std::vector<double> forward_flops(const BlockGraph& g) {
  std::vector<double> c;
  for (const auto& s : g.steps()) c.push_back(static_cast<double>(s.flops_fwd));
  return c;
}

// Training steps on the CPU backend with 2 BLAS threads, timed by the host profiler; from the
// weights of the file `weights_in` where one is given.
inline Trace run(const ModelConfig& m, const Schedule& s, int steps = 2, int warmup = 1,
                 std::uint64_t seed = 7, const std::string& weights_in = {}) {
  RunSpec spec;
  spec.weights_in = weights_in;
  spec.model = m;
  spec.schedule = s;
  spec.steps = steps;
  spec.warmup = warmup;
  spec.seed = seed;
  spec.poison = true;  // a use after free would change the numbers
  CpuBackend cpu(2);
  SteadyClock clock;
  HostProfiler prof(clock);
  Trace t = run_training(spec, cpu, &prof, clock);
  EXPECT_TRUE(t.complete) << t.status << ": " << t.error;
  return t;
}

// Block forwards counted from the run's schedule records (forward and recompute actions).
inline std::uint64_t counted_block_forwards(const Trace& t) {
  std::uint64_t n = 0;
  for (const auto& r : t.schedule_records)
    if (r.action == "forward" || r.action == "recompute") ++n;
  return n;
}

// Recompute FLOPs summed over the ops the run recorded in the recompute phase.
inline std::uint64_t counted_recompute_flops(const Trace& t) {
  std::uint64_t f = 0;
  for (const auto& o : t.ops)
    if (o.phase == Phase::Recompute) f += o.flops;
  return f;
}

}  // namespace remat::test
