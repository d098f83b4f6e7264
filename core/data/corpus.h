// What a step trains on: text as byte-level tokens, or token ids from a file (TokenFile).
// Batches are keyed by seed and step: the same seed and step always give the same batch,
// whatever ran before (docs/batch.md, "How batches are drawn").
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/token_file.h"

namespace remat {

class Corpus {
 public:
  // Throws Error when the file is missing or shorter than one sequence.
  static Corpus from_file(const std::string& path);
  static Corpus from_text(std::string text);
  // Token ids; throws Error when there are fewer than two.
  static Corpus from_tokens(std::shared_ptr<const TokenFile> tokens);

  std::size_t size() const { return tokens_ ? static_cast<std::size_t>(tokens_->size()) : bytes_.size(); }
  // Text: tokens[b*S + i] = byte at offset_b + i (mod vocab), targets the next byte, wrapping
  // around the end. Token ids: the window [offset_b, offset_b + S] of the file, offsets in
  // [0, size - S - 1], ids checked against vocab. Offsets from Philox(seed, step, b). Throws
  // Error for a token file shorter than S + 1 or an id outside [0, vocab).
  void batch(std::uint64_t seed, int step, int B, int S, int vocab,
             std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) const;

 private:
  std::string bytes_;
  std::shared_ptr<const TokenFile> tokens_;
};

}  // namespace remat
