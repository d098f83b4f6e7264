// The analytic bytes one transformer block saves for its backward under store-everything, next
// to which the desktop app shows the measured bytes per block.
//
// For a GPT-2 block (ffn 4h) with naive attention and 16-bit activations the closed form of
// Korthikanti et al. 2022 (§4.1) holds: with dropout s·b·h·(34 + 5·a·s/h) bytes (one-byte masks,
// the full s×s probabilities, no norm statistics), without it s·b·h·(32 + 2·a·s/h). For every
// other block (Llama, flash attention, fp32, another ffn width) the exact breakdown is the
// block table's saved set, tensor by tensor; the closed form is then not claimed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/model_config.h"

namespace remat {

struct BlockTerm {
  std::string tensor;   // "attn.probs"
  std::string formula;  // "2·a·s²·b"
  std::uint64_t bytes = 0;
};

struct BlockFormula {
  std::vector<BlockTerm> terms;  // the saved set in table order (the breakdown)
  std::uint64_t total = 0;       // their sum: BlockGraph::saved_bytes()
  bool closed_form = false;      // Korthikanti's closed form applies to this block
  std::string closed_form_text;  // "s·b·h·(34 + 5·a·s/h)"
  std::uint64_t closed_form_bytes = 0;
  std::string source;            // where the number comes from, in words
};

BlockFormula block_formula(const ModelConfig& m);

}  // namespace remat
