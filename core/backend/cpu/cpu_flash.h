// Shared by flash attention's two implementations (cpu_flash.cpp, on GEMMs over blocks of
// queries and tiles of keys; cpu_flash_ref.cpp, the reference loops): layout, per-lane
// workspace and argument checks.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/backend/cpu/cpu_common.h"

namespace remat::cpu::flash {

constexpr int kT = kFlashTile;  // keys per tile, and query rows per block of the GEMM path

// Per lane (D: the wider of d and dv): K and V of one kv head [S, D], their gradients, four head vectors [D], a tile
// of scores and a tile of dropout bits (the reference loops' part); a head's Q, dO and output
// (ctx or dQ) [S, d], two [kT, kT] tiles and three per-row values [S] (the GEMM path's part).
// One layout for both, so the workspace does not depend on which one runs.
struct FlashWs {
  float *k = nullptr, *v = nullptr, *dk = nullptr, *dv = nullptr, *vec = nullptr, *s = nullptr;
  std::uint32_t* bits = nullptr;
  float *q = nullptr, *go = nullptr, *o = nullptr, *t1 = nullptr, *t2 = nullptr, *rows = nullptr;
  std::int64_t sd = 0;
  int S = 0, d = 0;
  FlashWs(Arena& a, const AttnDims& dm, int threads)
      : sd(static_cast<std::int64_t>(dm.S) * std::max(dm.d, dm.v_dim())), S(dm.S), d(std::max(dm.d, dm.v_dim())) {
    k = a.take<float>(threads * sd);
    v = a.take<float>(threads * sd);
    dk = a.take<float>(threads * sd);
    dv = a.take<float>(threads * sd);
    vec = a.take<float>(static_cast<std::int64_t>(threads) * 4 * d);
    s = a.take<float>(static_cast<std::int64_t>(threads) * kT);
    bits = a.take<std::uint32_t>(static_cast<std::int64_t>(threads) * kT);
    q = a.take<float>(threads * sd);
    go = a.take<float>(threads * sd);
    o = a.take<float>(threads * sd);
    t1 = a.take<float>(static_cast<std::int64_t>(threads) * kT * kT);
    t2 = a.take<float>(static_cast<std::int64_t>(threads) * kT * kT);
    rows = a.take<float>(static_cast<std::int64_t>(threads) * 3 * S);
  }
};

struct FlashLayout {
  std::int64_t width, ctx_width;
  int S, d, dv, heads, kv_heads, group;  // dv: the value heads' (and the context's heads') width
  explicit FlashLayout(const AttnDims& a)
      : width(a.qkv_width()), ctx_width(a.ctx_width()), S(a.S), d(a.d), dv(a.v_dim()), heads(a.heads),
        kv_heads(a.kv_heads), group(a.group()) {}
  std::int64_t row(int b, int i) const { return (static_cast<std::int64_t>(b) * S + i) * width; }
  std::int64_t ctx(int b, int i, int h) const {
    return (static_cast<std::int64_t>(b) * S + i) * ctx_width + ctx_col(h);
  }
  std::int64_t lse(int b, int h, int i) const {
    return (static_cast<std::int64_t>(b) * heads + h) * S + i;
  }
  std::int64_t q_col(int h) const { return static_cast<std::int64_t>(h) * d; }
  std::int64_t k_col(int g) const { return static_cast<std::int64_t>(heads + g) * d; }
  std::int64_t v_col(int g) const { return static_cast<std::int64_t>(heads + kv_heads) * d + static_cast<std::int64_t>(g) * dv; }
  std::int64_t ctx_col(int h) const { return static_cast<std::int64_t>(h) * dv; }
};

inline void check_flash(const AttnDims& a, const char* op, const Tensor& qkv, const Tensor& ctx,
                        const Tensor& lse, float p) {
  check_dims(a, op);
  if (!(p >= 0.0f && p < 1.0f))
    throw Error(std::string("cpu ") + op + ": dropout p must be in [0, 1), got " +
                std::to_string(p));
  const std::int64_t rows = static_cast<std::int64_t>(a.B) * a.S;
  check_float(qkv, op, "qkv", rows * a.qkv_width());
  check_float(ctx, op, "ctx", rows * a.ctx_width());
  check_dtype(lse, DType::F32, op, "lse", static_cast<std::int64_t>(a.B) * a.heads * a.S);
}

}  // namespace remat::cpu::flash
