#include "core/data/corpus.h"

#include <fstream>
#include <sstream>

#include "core/util/error.h"
#include "core/util/philox.h"

namespace remat {

Corpus Corpus::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read the training corpus '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_text(ss.str());
}

Corpus Corpus::from_text(std::string text) {
  if (text.size() < 2) throw Error("the training corpus is empty");
  Corpus c;
  c.bytes_ = std::move(text);
  return c;
}

void Corpus::batch(std::uint64_t seed, int step, int B, int S, int vocab,
                   std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) const {
  tokens.resize(static_cast<std::size_t>(B) * S);
  targets.resize(tokens.size());
  const std::size_t n = bytes_.size();
  DropoutKey key{seed, static_cast<std::uint32_t>(step), 0xFFFFFu, 0xDA7A};
  for (int b = 0; b < B; ++b) {
    std::size_t off = philox_bits(key, static_cast<std::uint64_t>(b)) % n;
    for (int i = 0; i < S; ++i) {
      // Wrap around the end, so any sequence length works on any corpus.
      auto tok = static_cast<unsigned char>(bytes_[(off + i) % n]);
      auto nxt = static_cast<unsigned char>(bytes_[(off + i + 1) % n]);
      tokens[static_cast<std::size_t>(b) * S + i] = static_cast<std::int32_t>(tok % vocab);
      targets[static_cast<std::size_t>(b) * S + i] = static_cast<std::int32_t>(nxt % vocab);
    }
  }
}

}  // namespace remat
