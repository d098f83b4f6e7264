// Internal: the kernel-side view of FlashArgs, shared by flash_fwd.cu and flash_bwd.cu.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "core/util/error.h"
#include "kernels/detail/attn_band.h"
#include "kernels/detail/attn_tile.cuh"
#include "kernels/detail/device_utils.cuh"
#include "kernels/flash_attn.cuh"

namespace remat::kernels::detail {

struct FlashDev {
  const void* qkv;
  void* ctx;
  float* lse;
  const void* dctx;
  void* dqkv;
  float* dvec;
  const void* sinks;  // [heads] in the model's dtype, or null
  int B, S, heads, kv_heads, d, dv, group, width, ctx_width;  // dv: the value heads' width
  float scale, scale_log2;
  int window;     // the band of attn_band.h (0 when it covers S)
  float softcap;  // > 0: soft-capped scores
  DropoutKey key;
  std::uint32_t thr;
  float keep_scale;
  int dropout;
};

inline FlashDev make_flash_dev(const FlashArgs& a) {
  if (a.B <= 0 || a.S <= 0 || a.heads <= 0 || a.kv_heads <= 0 || a.d <= 0 || a.dv < 0 ||
      a.heads % a.kv_heads != 0)
    throw Error("flash attention: bad dims B=" + std::to_string(a.B) + " S=" +
                std::to_string(a.S) + " heads=" + std::to_string(a.heads) + " kv_heads=" +
                std::to_string(a.kv_heads) + " d=" + std::to_string(a.d) + " dv=" +
                std::to_string(a.dv));
  if (!(a.p >= 0.0f && a.p < 1.0f))
    throw Error("flash attention: dropout p must be in [0, 1), got " + std::to_string(a.p));
  if (!(a.softcap >= 0.0f) || !std::isfinite(a.softcap))
    throw Error("flash attention: softcap must be 0 (none) or positive, got " +
                std::to_string(a.softcap));
  FlashDev p{};
  p.qkv = a.qkv;
  p.ctx = a.ctx;
  p.lse = a.lse;
  p.dctx = a.dctx;
  p.dqkv = a.dqkv;
  p.dvec = a.scratch;
  p.sinks = a.sinks;
  p.B = a.B;
  p.S = a.S;
  p.heads = a.heads;
  p.kv_heads = a.kv_heads;
  p.d = a.d;
  p.dv = a.dv > 0 ? a.dv : a.d;
  p.group = a.heads / a.kv_heads;
  p.width = (a.heads + a.kv_heads) * a.d + a.kv_heads * p.dv;  // AttnDims::qkv_width
  p.ctx_width = a.heads * p.dv;
  p.scale = a.scale;
  p.scale_log2 = a.scale * kLog2e;
  p.window = band_within(a.window, a.S);
  p.softcap = a.softcap;
  p.key = a.key;
  p.thr = dropout_threshold(a.p);
  p.keep_scale = a.p > 0.0f ? 1.0f / (1.0f - a.p) : 1.0f;
  p.dropout = a.p > 0.0f ? 1 : 0;
  return p;
}

// Index of probability (b, h, i, j) in the naive path's [B, heads, S, S] layout.
__device__ __forceinline__ std::uint64_t prob_index(const FlashDev& p, int b, int h, int i, int j) {
  return ((static_cast<std::uint64_t>(b) * p.heads + h) * p.S + i) * p.S + j;
}

__device__ __forceinline__ ScoreMap score_map(const FlashDev& p) {
  return {p.scale_log2, p.scale, p.softcap, p.window};
}

}  // namespace remat::kernels::detail
