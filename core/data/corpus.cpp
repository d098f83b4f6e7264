#include "core/data/corpus.h"

#include <fstream>
#include <sstream>

#include "core/util/error.h"
#include "core/util/json_io.h"
#include "core/util/philox.h"

namespace remat {

Corpus Corpus::from_file(const std::string& path) {
  try {
    return from_text(read_regular_file(path, limits::kTableFileBytes));
  } catch (const Error& e) {
    throw Error(std::string("the training corpus: ") + e.what());
  }
}

Corpus Corpus::from_text(std::string text) {
  if (text.size() < 2) throw Error("the training corpus is empty");
  Corpus c;
  c.bytes_ = std::move(text);
  return c;
}

Corpus Corpus::from_tokens(std::shared_ptr<const TokenFile> tokens) {
  if (!tokens || tokens->size() < 2) throw Error("the token file holds fewer than two tokens");
  Corpus c;
  c.tokens_ = std::move(tokens);
  return c;
}

void Corpus::batch(std::uint64_t seed, int step, int B, int S, int vocab,
                   std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) const {
  tokens.resize(static_cast<std::size_t>(B) * S);
  targets.resize(tokens.size());
  DropoutKey key{seed, static_cast<std::uint32_t>(step), 0xFFFFFu, 0xDA7A};
  if (tokens_) {
    const std::uint64_t n = tokens_->size();
    if (n < static_cast<std::uint64_t>(S) + 1)
      throw Error(tokens_->path() + ": " + std::to_string(n) + " tokens, fewer than one sequence of " +
                  std::to_string(S) + " and its last target");
    const std::uint64_t starts = n - static_cast<std::uint64_t>(S);
    std::vector<std::int64_t> window;
    for (int b = 0; b < B; ++b) {
      const std::uint64_t off = philox_bits(key, static_cast<std::uint64_t>(b)) % starts;
      tokens_->read(off, static_cast<std::size_t>(S) + 1, window);
      for (int i = 0; i <= S; ++i) {
        const std::int64_t id = window[static_cast<std::size_t>(i)];
        if (id < 0 || id >= vocab)
          throw Error(tokens_->path() + ": token " + std::to_string(off + i) + " is " +
                      (id < 0 ? std::string("negative or past 32 bits") : std::to_string(id)) +
                      ", outside the model's vocabulary [0, " + std::to_string(vocab) + ")");
        const std::size_t k = static_cast<std::size_t>(b) * S + static_cast<std::size_t>(i);
        if (i < S) tokens[k] = static_cast<std::int32_t>(id);
        if (i > 0) targets[k - 1] = static_cast<std::int32_t>(id);
      }
    }
    return;
  }
  const std::size_t n = bytes_.size();
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
