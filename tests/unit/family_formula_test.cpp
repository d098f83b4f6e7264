// Saved bytes per block of every family against the formula in docs/model-config.md, and the
// bytes the simulated step holds after its forward sweep against the same formula.
#include <gtest/gtest.h>

#include "core/engine/simulator.h"
#include "core/graph/block_graph.h"
#include "core/schedule/schedule.h"

namespace remat {
namespace {

// docs/model-config.md, "Saved bytes per block", term by term.
std::uint64_t formula(const ModelConfig& m) {
  const std::uint64_t e = dtype_size(m.dtype), s = m.seq, b = m.batch, h = m.hidden, f = m.ffn,
                      a = m.heads, q = m.q_width(), W = m.qkv_width(), sb = s * b;
  std::uint64_t bytes = e * sb * (h + W + q + h);  // block.in, attn.qkv, attn.ctx, ln2.in
  if (m.block_layout != BlockLayout::Sequential) bytes -= e * sb * h;  // no ln2.in: both read block.in
  if (m.block_layout == BlockLayout::ParallelSharedNorm) bytes -= e * sb * h;  // one norm output
  if (m.placement != NormPlacement::Post) bytes += 2 * e * sb * h;  // ln1.out, ln2.out
  if (m.placement != NormPlacement::Pre) bytes += 2 * e * sb * h;   // proj_out, down_out
  if (m.qk_norm != QkNormKind::None) bytes += e * sb * W;                              // attn.qkv_raw
  bytes += (m.gated_mlp() ? 3 : 2) * e * sb * f;
  if (m.attention == AttentionImpl::Naive) {
    bytes += e * a * s * s * b;
    if (m.drops(kDropAttention)) bytes += (1 + e) * a * s * s * b;
  } else {
    bytes += 4 * a * s * b;
  }
  if (m.drops(kDropResidual)) bytes += 2 * sb * h;
  return bytes;
}

ModelConfig family(Family f) {
  ModelConfig m;
  set_family(m, f);
  m.layers = 3;
  m.hidden = 48;
  m.heads = 4;
  m.kv_heads = f == Family::Gpt2 || f == Family::GptNeox ? 4 : 2;
  m.ffn = 80;
  m.seq = 12;
  m.positions = 16;
  m.batch = 2;
  m.vocab = 40;
  if (f == Family::Mistral || f == Family::Gemma2 || f == Family::Gemma3) m.sliding_window = 5;  // shorter than seq
  if (f == Family::SmolLM3) {  // block 2 without RoPE: its own table, the same bytes
    LayerKind nope{"nope"};
    nope.rope = false;
    m.layer_kinds = {LayerKind{"rope"}, nope};
    m.layer_pattern = {0, 0, 1};
  }
  if (f == Family::Gemma2) m.attn_softcap = 50.0, m.final_softcap = 30.0;
  return m;
}

TEST(FamilyFormula, SavedBytesOfEveryFamilyAreTheFormulasToTheByte) {
  int checked = 0;
  for (Family f : {Family::Gpt2, Family::Llama, Family::Mistral, Family::Qwen2, Family::Gemma,
                   Family::Gemma2, Family::Phi3, Family::Olmo2, Family::Qwen3, Family::Granite,
                   Family::GptNeox, Family::Falcon, Family::Gemma3, Family::SmolLM3})
    for (AttentionImpl attn : {AttentionImpl::Naive, AttentionImpl::Flash})
      for (DType dt : {DType::BF16, DType::F32})
        for (double p : {0.0, 0.1})
          for (unsigned sites : {static_cast<unsigned>(kDropAll), static_cast<unsigned>(kDropAttention)}) {
            ModelConfig m = family(f);
            m.attention = attn;
            m.dtype = dt;
            m.dropout = p;
            m.dropout_sites = sites;
            if (f == Family::Gemma) m.head_size = 16;  // head_dim independent of hidden / heads
            SCOPED_TRACE(std::string(to_string(f)) + " " + to_string(attn) + " " + to_string(dt) +
                         " p=" + std::to_string(p) + " sites=" + std::to_string(sites));
            EXPECT_EQ(BlockGraph(m).saved_bytes(), formula(m));
            ++checked;
          }
  EXPECT_EQ(checked, 14 * 2 * 2 * 2 * 2);
}

TEST(FamilyFormula, TheSimulatedStepHoldsTheFormulasBytesPerBlock) {
  for (Family f : {Family::Gpt2, Family::Llama, Family::Mistral, Family::Qwen2, Family::Gemma,
                   Family::Gemma2, Family::Phi3, Family::Olmo2, Family::Qwen3, Family::Granite,
                   Family::GptNeox, Family::Falcon, Family::Gemma3, Family::SmolLM3}) {
    ModelConfig m = family(f);
    m.dropout = 0.1;
    SCOPED_TRACE(to_string(f));
    Schedule s;
    s.blocks = m.layers;
    for (int b = 0; b < m.layers; ++b) s.forward(b, Keep::all());
    for (int b = m.layers - 1; b >= 0; --b) s.backward(b);
    const Prediction p = simulate(m, s, nullptr);
    ASSERT_EQ(p.saved_bytes_per_block.size(), static_cast<std::size_t>(m.layers));
    for (int b = 0; b < m.layers; ++b) EXPECT_EQ(p.saved_bytes_per_block[b], formula(m)) << "block " << b;
  }
}

}  // namespace
}  // namespace remat
