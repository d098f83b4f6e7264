#include "core/engine/weight_init.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/engine/weight_init_simd.h"
#include "core/util/bf16.h"
#include "core/util/error.h"
#include "core/util/parallel.h"

namespace remat {

namespace {

// Values per piece of work: large enough to amortize a piece, small enough to balance threads.
constexpr std::int64_t kPiece = std::int64_t{1} << 16;

// One normal pair from two uniform draws: (cos, sin) of Box-Muller, both times stddev.
inline void box_muller(std::uint32_t a, std::uint32_t b, float stddev, float& c, float& s) {
  const float u1 = (static_cast<float>(a) + 1.0f) / 4294967296.0f;
  const float u2 = static_cast<float>(b) / 4294967296.0f;
  const float r = std::sqrt(-2.0f * std::log(u1)), th = 6.2831853f * u2;
  c = stddev * r * std::cos(th);
  s = stddev * r * std::sin(th);
}

struct Piece {
  std::size_t param;
  std::int64_t begin, end;
};

bool is_residual_proj(const ParamSpec& p) {
  return p.name.find("attn.proj.w") != std::string::npos ||
         p.name.find("mlp.fc2.w") != std::string::npos;
}

// normal_values over any [begin, end): the unaligned head and tail through a block of four.
void normal_range(const DropoutKey& key, float stddev, std::int64_t numel, std::int64_t begin,
                  std::int64_t end, float* out) {
  float four[4];
  if (begin % 4 != 0 && begin < end) {
    const std::int64_t a = begin - begin % 4, e4 = std::min(numel, a + 4);
    normal_values(key, stddev, numel, a, e4, four);
    const std::int64_t upto = std::min(end, e4);
    out = std::copy(four + (begin - a), four + (upto - a), out);
    begin = upto;
  }
  if (begin >= end) return;
  const std::int64_t body = end == numel ? end : end - end % 4;
  if (body > begin) {
    normal_values(key, stddev, numel, begin, body, out);
    out += body - begin;
  }
  if (body < end) {
    normal_values(key, stddev, numel, body, std::min(numel, body + 4), four);
    std::copy(four, four + (end - body), out);
  }
}

}  // namespace

namespace weight_simd {

bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(_M_X64)
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

namespace {
std::atomic<bool>& enabled() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("REMAT_WEIGHT_INIT");
    return !(e && std::strcmp(e, "scalar") == 0);
  }()};
  return on;
}
}  // namespace

#if defined(__x86_64__)
// The lanes against this process's libm on inputs spread over both functions' domains (the
// tests check every input): where libm is not the one they repeat, the scalar loop is used.
bool agrees_with_libm() {
  alignas(64) float in[16], a[16], b[16];
  for (std::uint32_t r = 0; r < 256; ++r) {
    for (int j = 0; j < 16; ++j) {
      const std::uint32_t bits = 0x2f800000u + (r * 16 + static_cast<std::uint32_t>(j)) * 0x3e7u * 977u % 0x10000000u;
      in[j] = std::min(1.0f, std::bit_cast<float>(bits));
    }
    log16(in, a);
    for (int j = 0; j < 16; ++j)
      if (std::bit_cast<std::uint32_t>(a[j]) != std::bit_cast<std::uint32_t>(std::log(in[j]))) return false;
    for (float& x : in) x *= 6.2831853f;
    sincos16(in, a, b);
    for (int j = 0; j < 16; ++j)
      if (std::bit_cast<std::uint32_t>(a[j]) != std::bit_cast<std::uint32_t>(std::sin(in[j])) ||
          std::bit_cast<std::uint32_t>(b[j]) != std::bit_cast<std::uint32_t>(std::cos(in[j])))
        return false;
  }
  return true;
}
#endif

bool active() {
#if defined(__x86_64__)
  static const bool usable = cpu_has_avx512() && agrees_with_libm();
  return usable && enabled().load(std::memory_order_relaxed);
#else
  return false;
#endif
}
void set_enabled(bool on) { enabled().store(on, std::memory_order_relaxed); }

}  // namespace weight_simd

DropoutKey weight_init_key(std::uint64_t seed, std::size_t index) {
  return DropoutKey{seed, 0xFFFFFFFFu, static_cast<std::uint32_t>(index), 0x5EED};
}

void normal_values(const DropoutKey& key, float stddev, std::int64_t numel, std::int64_t begin,
                   std::int64_t end, float* out) {
  if (begin < 0 || begin % 4 != 0 || end > numel || (end < numel && end % 4 != 0) || end < begin)
    throw Error("normal_values: bad range [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") of " + std::to_string(numel) + " values");
  std::int64_t i = begin;
#if defined(__x86_64__)
  if (weight_simd::active())  // whole groups of 16 blocks (64 values), the same bits
    for (; i + 64 <= end; i += 64)
      weight_simd::normal_blocks16(key, stddev, static_cast<std::uint64_t>(i) >> 2, out + (i - begin));
#endif
  for (; i < end; i += 4) {
    // One Philox block serves elements i .. i + 3: two Box-Muller pairs.
    const Philox4 r = philox_block(key, static_cast<std::uint64_t>(i) >> 2);
    float* o = out + (i - begin);
    float c, s;
    box_muller(r.v[0], r.v[1], stddev, c, s);
    o[0] = c;
    if (i + 1 < end) o[1] = s;
    if (i + 2 >= end) break;
    box_muller(r.v[2], r.v[3], stddev, c, s);
    o[2] = c;
    if (i + 3 < end) o[3] = s;
  }
}

void init_weight_values(const ParamLayout& layout, int layers, std::uint64_t seed, float* out,
                        int threads, std::uint16_t* rounded) {
  const float base = 0.02f, resid = 0.02f / std::sqrt(2.0f * static_cast<float>(layers));
  std::vector<Piece> pieces;
  for (std::size_t pi = 0; pi < layout.params().size(); ++pi) {
    const std::int64_t n = layout.params()[pi].numel();
    for (std::int64_t b = 0; b < n; b += kPiece) pieces.push_back({pi, b, std::min(n, b + kPiece)});
  }
  parallel_parts(threads, static_cast<std::int64_t>(pieces.size()), 1,
                 [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t k = p0; k < p1; ++k) {
      const Piece& pc = pieces[static_cast<std::size_t>(k)];
      const ParamSpec& p = layout.params()[pc.param];
      float* o = out + p.offset + pc.begin;
      const std::int64_t n = pc.end - pc.begin;
      if (p.cols == 1) {  // vectors: norm weights their identity, biases 0 (ParamSpec::fill)
        std::fill(o, o + n, p.fill);
      } else {
        normal_values(weight_init_key(seed, pc.param), is_residual_proj(p) ? resid : base,
                      p.numel(), pc.begin, pc.end, o);
      }
      if (rounded) {
        std::uint16_t* r = rounded + p.offset + pc.begin;
        for (std::int64_t i = 0; i < n; ++i) r[i] = float_to_bf16(o[i]);
      }
    }
  });
}

void init_weight_runs(const ParamLayout& layout, int layers, std::uint64_t seed,
                      const std::vector<WeightRun>& runs, float* out, int threads) {
  const float base = 0.02f, resid = 0.02f / std::sqrt(2.0f * static_cast<float>(layers));
  std::vector<WeightRun> pieces;  // the runs cut into pieces of at most kPiece values
  for (const WeightRun& r : runs) {
    if (r.param >= layout.params().size() || r.begin < 0 || r.end < r.begin ||
        r.end > layout.params()[r.param].numel())
      throw Error("weights: run [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                  ") of parameter " + std::to_string(r.param) + " is outside the layout");
    for (std::int64_t b = r.begin; b < r.end; b += kPiece)
      pieces.push_back({r.param, b, std::min(r.end, b + kPiece), r.dst + (b - r.begin)});
  }
  parallel_parts(threads, static_cast<std::int64_t>(pieces.size()), 1,
                 [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t k = p0; k < p1; ++k) {
      const WeightRun& pc = pieces[static_cast<std::size_t>(k)];
      const ParamSpec& p = layout.params()[pc.param];
      float* o = out + pc.dst;
      if (p.cols == 1)
        std::fill(o, o + (pc.end - pc.begin), p.fill);
      else
        normal_range(weight_init_key(seed, pc.param), is_residual_proj(p) ? resid : base,
                     p.numel(), pc.begin, pc.end, o);
    }
  });
}

std::vector<WeightRun> layout_weight_runs(const ParamLayout& layout) {
  std::vector<WeightRun> runs;
  for (std::size_t i = 0; i < layout.params().size(); ++i) {
    const ParamSpec& p = layout.params()[i];
    runs.push_back({i, 0, p.numel(), p.offset});
  }
  return runs;
}

std::vector<WeightRun> runs_within(const std::vector<WeightRun>& runs, std::int64_t lo, std::int64_t n) {
  std::vector<WeightRun> out;
  for (const WeightRun& r : runs) {
    const std::int64_t from = std::max(lo, r.dst), to = std::min(lo + n, r.dst + (r.end - r.begin));
    if (to > from) out.push_back({r.param, r.begin + (from - r.dst), r.begin + (to - r.dst), from - lo});
  }
  return out;
}

std::vector<float> reference_weight_values(const ParamLayout& layout, int layers,
                                           std::uint64_t seed) {
  std::vector<float> host(static_cast<std::size_t>(layout.total()));
  const float base = 0.02f, resid = 0.02f / std::sqrt(2.0f * static_cast<float>(layers));
  for (std::size_t pi = 0; pi < layout.params().size(); ++pi) {
    const ParamSpec& p = layout.params()[pi];
    float* out = host.data() + p.offset;
    if (p.cols == 1) {
      for (std::int64_t i = 0; i < p.numel(); ++i) out[i] = p.fill;
      continue;
    }
    const bool residual_proj = p.name.find("attn.proj.w") != std::string::npos ||
                               p.name.find("mlp.fc2.w") != std::string::npos;
    const float stddev = residual_proj ? resid : base;
    const DropoutKey key{seed, 0xFFFFFFFFu, static_cast<std::uint32_t>(pi), 0x5EED};
    for (std::int64_t i = 0; i < p.numel(); i += 2) {
      const float u1 =
          (static_cast<float>(philox_bits(key, static_cast<std::uint64_t>(i))) + 1.0f) /
          4294967296.0f;
      const float u2 = static_cast<float>(philox_bits(key, static_cast<std::uint64_t>(i) + 1)) /
                       4294967296.0f;
      const float r = std::sqrt(-2.0f * std::log(u1)), th = 6.2831853f * u2;
      out[i] = stddev * r * std::cos(th);
      if (i + 1 < p.numel()) out[i + 1] = stddev * r * std::sin(th);
    }
  }
  return host;
}

}  // namespace remat
