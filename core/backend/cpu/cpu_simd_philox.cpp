// The SIMD dropout-mask kernel of cpu_simd.h (Kernels::dropout_keep), compiled once per Highway
// target like cpu_simd_kernels.cpp (whose kKernels lists it): Philox4x32-10 on as many counters
// as a vector has 32-bit lanes, the same integer arithmetic as core/util/philox.h, so every
// target writes the reference's bytes. Groups of four elements the range covers only in part,
// and the one-lane target, run the reference's scalar Philox.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/backend/cpu/cpu_simd_philox.cpp"
#include "core/backend/cpu/cpu_simd_targets.h"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "core/backend/cpu/cpu_simd.h"
#include "core/backend/cpu/cpu_simd_inl.h"
#include "core/util/philox.h"

HWY_BEFORE_NAMESPACE();
namespace remat::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using std::int64_t;
using std::uint32_t;
using std::uint64_t;

namespace {

// Elements [g * 4 + j0, g * 4 + j1) of group g, the reference's way, into out[0, j1 - j0).
void GroupScalar(uint64_t g, int j0, int j1, uint32_t c2, uint32_t c3, uint64_t seed, uint32_t thr,
                 std::uint8_t* out) {
  Philox4 c;
  c.v[0] = static_cast<uint32_t>(g);
  c.v[1] = static_cast<uint32_t>(g >> 32);
  c.v[2] = c2;
  c.v[3] = c3;
  const Philox4 r = philox4x32(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  for (int j = j0; j < j1; ++j) out[j - j0] = r.v[j] >= thr ? 1 : 0;
}

}  // namespace

void DropoutKeep(uint64_t first, int64_t n, uint32_t c2, uint32_t c3, uint64_t seed, uint32_t thr,
                 std::uint8_t* out) {
  if (n <= 0) return;
  const uint64_t end = first + static_cast<uint64_t>(n);
  uint64_t g = first >> 2;
  // A leading group covered in part.
  if (first & 3u) {
    const int j0 = static_cast<int>(first & 3u);
    const int j1 = (end >> 2) == g ? static_cast<int>(end & 3u) : 4;
    GroupScalar(g, j0, j1, c2, c3, seed, thr, out);
    out += j1 - j0;
    ++g;
    if ((g << 2) >= end) return;
  }
  const uint64_t gend = end >> 2;  // whole groups [g, gend), then a tail of end & 3 elements
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<uint32_t> du;
  const hn::RepartitionToWide<decltype(du)> dw;
  using VU = hn::Vec<decltype(du)>;
  const uint64_t N = hn::Lanes(du);
  const auto m0 = hn::Set(du, 0xD2511F53u), m1 = hn::Set(du, 0xCD9E8D57u);
  const auto lo_half = hn::Set(dw, 0xFFFFFFFFull);
  const hn::RebindToSigned<decltype(du)> di;
  const auto sign = hn::Set(du, 0x80000000u), one = hn::Set(du, 1u);
  const auto thrs = hn::BitCast(di, hn::Set(du, thr ^ 0x80000000u));
  // hi:lo = a * b for each 32-bit lane (even lanes from MulEven, odd ones from the lanes shifted
  // down).
  auto mulhilo = [&](VU a, VU b, VU& hi, VU& lo) HWY_ATTR {
    const auto pe = hn::MulEven(a, b);
    const auto po = hn::MulEven(hn::BitCast(du, hn::ShiftRight<32>(hn::BitCast(dw, a))),
                                hn::BitCast(du, hn::ShiftRight<32>(hn::BitCast(dw, b))));
    lo = hn::BitCast(du, hn::Or(hn::And(pe, lo_half), hn::ShiftLeft<32>(po)));
    hi = hn::BitCast(du, hn::Or(hn::ShiftRight<32>(pe), hn::And(po, hn::Set(dw, ~0xFFFFFFFFull))));
  };
  HWY_ALIGN uint32_t packed[HWY_MAX_BYTES / 4];
  for (; g + N <= gend && static_cast<uint32_t>(g) <= 0xFFFFFFFFu - (N - 1); g += N) {
    VU x0 = hn::Add(hn::Iota(du, 0), hn::Set(du, static_cast<uint32_t>(g)));
    VU x1 = hn::Set(du, static_cast<uint32_t>(g >> 32));
    VU x2 = hn::Set(du, c2), x3 = hn::Set(du, c3);
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r) {
      VU hi0, lo0, hi1, lo1;
      mulhilo(m0, x0, hi0, lo0);
      mulhilo(m1, x2, hi1, lo1);
      const auto n0 = hn::Xor(hn::Xor(hi1, x1), hn::Set(du, k0));
      const auto n2 = hn::Xor(hn::Xor(hi0, x3), hn::Set(du, k1));
      x0 = n0;
      x1 = lo1;
      x2 = n2;
      x3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    // Byte j of group lane l is element 4 (g + l) + j: 1 where its bits are >= thr.
    // v >= thr as !(thr > v), compared signed with the sign bits flipped.
    auto keep = [&](VU v) HWY_ATTR {
      const auto vs = hn::BitCast(di, hn::Xor(v, sign));
      return hn::IfThenZeroElse(hn::RebindMask(du, hn::Gt(thrs, vs)), one);
    };
    const auto bytes = hn::Or(hn::Or(keep(x0), hn::ShiftLeft<8>(keep(x1))),
                              hn::Or(hn::ShiftLeft<16>(keep(x2)), hn::ShiftLeft<24>(keep(x3))));
    hn::Store(bytes, du, packed);
    std::memcpy(out, packed, N * 4);  // little-endian: byte j of lane l at 4 l + j
    out += N * 4;
  }
#endif
  for (; g < gend; ++g, out += 4) GroupScalar(g, 0, 4, c2, c3, seed, thr, out);
  if (end & 3u)
    GroupScalar(g, 0, static_cast<int>(end & 3u), c2, c3, seed, thr, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace remat::cpu::simd
HWY_AFTER_NAMESPACE();
