#include "core/analysis/block_formula.h"

#include "core/graph/block_graph.h"

namespace remat {

BlockFormula block_formula(const ModelConfig& m) {
  BlockFormula f;
  BlockGraph g(m);
  for (const auto& t : g.tensors()) {
    if (!t.saved) continue;
    f.terms.push_back({t.name, t.formula, t.bytes});
    f.total += t.bytes;
  }
  const bool korthikanti = m.family == Family::Gpt2 && m.mlp == MlpKind::GeluTanh && m.qkv_bias &&
                           m.out_bias && m.mlp_bias && m.dropout_sites == kDropAll && m.attention == AttentionImpl::Naive &&
                           m.ffn == 4 * m.hidden && dtype_size(m.dtype) == 2 && m.kv_heads == m.heads;
  if (korthikanti) {
    const std::uint64_t s = static_cast<std::uint64_t>(m.seq), b = static_cast<std::uint64_t>(m.batch),
                        h = static_cast<std::uint64_t>(m.hidden), a = static_cast<std::uint64_t>(m.heads);
    const bool drop = m.has_dropout();
    f.closed_form = true;
    f.closed_form_text = drop ? "s·b·h·(34 + 5·a·s/h)" : "s·b·h·(32 + 2·a·s/h)";
    f.closed_form_bytes = (drop ? 34 : 32) * s * b * h + (drop ? 5 : 2) * a * s * s * b;
    f.source = drop ? "Korthikanti et al. 2022, §4.1 (GPT block, dropout, naive attention)"
                    : "Korthikanti et al. 2022, §4.1 without the dropout terms";
  } else {
    f.source = std::string("exact breakdown of the ") + to_string(m.family) + " block table (" +
               to_string(m.attention) + " attention, " + to_string(m.dtype) + ")";
  }
  return f;
}

}  // namespace remat
