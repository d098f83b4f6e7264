// Philox 4x32-10 counter-based generator (Salmon et al., SC'11), usable on host and device.
// Dropout masks are keyed by (seed, step, block, site) and the element position, so a
// recomputed mask equals the first one without being stored. The CUDA kernels include this
// header too, so both backends draw the same masks.
#pragma once
#include <cstdint>

#include "core/util/bf16.h"  // REMAT_HD

namespace remat {

struct Philox4 {
  std::uint32_t v[4];
};

REMAT_HD void philox_mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

// Ten rounds of Philox4x32 on counter c with key k.
REMAT_HD Philox4 philox4x32(Philox4 c, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    std::uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kM0, c.v[0], hi0, lo0);
    philox_mulhilo(kM1, c.v[2], hi1, lo1);
    Philox4 n;
    n.v[0] = hi1 ^ c.v[1] ^ k0;
    n.v[1] = lo1;
    n.v[2] = hi0 ^ c.v[3] ^ k1;
    n.v[3] = lo0;
    c = n;
    k0 += kW0;
    k1 += kW1;
  }
  return c;
}

// Where a dropout mask lives: one key per (seed, step, block, site).
struct DropoutKey {
  std::uint64_t seed = 0;
  std::uint32_t step = 0;
  std::uint32_t block = 0;  // block index, or 0xFFFF for the embedding
  std::uint32_t site = 0;   // DropoutSite value
  // Index of the mask's first element in the global batch's mask (a data-parallel replica's
  // slice starts past the others'); element i of the mask is element offset + i of that one.
  std::uint64_t offset = 0;
  // A mask made of runs of `run` elements `stride` apart in that one (a tensor-parallel rank's
  // heads of each batch row): element i is element offset + (i / run) * stride + i % run.
  // 0: one run.
  std::uint64_t run = 0, stride = 0;
};

// Where element `index` of the mask keyed by `key` lies in the global mask.
REMAT_HD std::uint64_t mask_position(const DropoutKey& key, std::uint64_t index) {
  if (key.run) index = index / key.run * key.stride + index % key.run;
  return index + key.offset;
}

enum DropoutSite : std::uint32_t {
  kSiteEmbedding = 1,
  kSiteAttentionProbs = 2,
  kSiteAttentionResidual = 3,
  kSiteMlpResidual = 4,
};

// The 128 bits of elements [4 * group, 4 * group + 4) of the mask keyed by `key`: element i
// is v[i & 3] of block i / 4.
REMAT_HD Philox4 philox_block(const DropoutKey& key, std::uint64_t group) {
  Philox4 c;
  c.v[0] = static_cast<std::uint32_t>(group);
  c.v[1] = static_cast<std::uint32_t>(group >> 32);
  c.v[2] = key.step;
  c.v[3] = (key.block << 8) ^ key.site;
  return philox4x32(c, static_cast<std::uint32_t>(key.seed),
                    static_cast<std::uint32_t>(key.seed >> 32));
}

// 32 random bits for element `index` of the mask keyed by `key` (after its offset).
REMAT_HD std::uint32_t philox_bits(const DropoutKey& key, std::uint64_t index) {
  index = mask_position(key, index);
  return philox_block(key, index >> 2).v[index & 3u];
}

// Elements with bits below the threshold are dropped. p is in [0, 1).
REMAT_HD std::uint32_t dropout_threshold(float p) {
  double t = static_cast<double>(p) * 4294967296.0;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(t);
}

REMAT_HD bool dropout_keep(const DropoutKey& key, std::uint64_t index, std::uint32_t threshold) {
  return philox_bits(key, index) >= threshold;
}

}  // namespace remat
