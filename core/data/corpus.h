// Training text as byte-level tokens. Batches are keyed by seed and step: the same seed and
// step always give the same batch, whatever ran before.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace remat {

class Corpus {
 public:
  // Throws Error when the file is missing or shorter than one sequence.
  static Corpus from_file(const std::string& path);
  static Corpus from_text(std::string text);

  std::size_t size() const { return bytes_.size(); }
  // tokens[b*S + i] = byte at offset_b + i, targets the next byte; offsets from Philox(seed, step).
  void batch(std::uint64_t seed, int step, int B, int S, int vocab,
             std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) const;

 private:
  std::string bytes_;
};

}  // namespace remat
