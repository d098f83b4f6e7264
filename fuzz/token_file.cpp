// Token files as `run --tokens FILE [--tokens-dtype T]` reads them: the first byte picks the
// name (.npy or raw) and the dtype given, the rest is the file; then batches drawn from it as a
// step draws them.
#include <string>
#include <vector>

#include "core/data/corpus.h"
#include "core/data/token_file.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"

namespace remat::fuzz {

void token_file(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  static const char* dtypes[] = {"", "u8", "u16", "i16", "u32", "i32", "i64", "u64"};
  static const std::string npy = scratch_path("tokens.npy"), raw = scratch_path("tokens.bin");
  const std::uint8_t tag = data[0];
  const std::string& path = tag & 1 ? npy : raw;
  write_file(path, data + 1, size - 1);
  refused_or_accepted([&] {
    auto tokens = TokenFile::open(path, dtypes[(tag >> 1) % 8]);
    Corpus c = Corpus::from_tokens(tokens);
    std::vector<std::int32_t> x, y;
    for (int step = 0; step < 3; ++step) c.batch(1234, step, 2, 4, 1 << 16, x, y);
  });
}

}  // namespace remat::fuzz
