// Shared by the naive attention's two implementations (cpu_attention.cpp, the per-head GEMMs;
// cpu_attention_ref.cpp, the reference loops): the qkv / probabilities / context layout, the
// per-lane workspace and the argument checks.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/backend/cpu/cpu_common.h"

namespace remat::cpu::attn {

// Per lane: staged K or V head [S, D], its gradient [S, D], two rows [S], two head vectors [D]
// (the reference loops' part); a staged Q or context-gradient head [S, D], a head's output
// [S, D] and one head's [S, S] scores or probabilities (the GEMM path's part). One layout for
// both, so the workspace does not depend on which one runs. D: the wider of the q|k heads' d and
// the value heads' dv.
struct AttnWs {
  float *kv = nullptr, *acc = nullptr, *row = nullptr, *vec = nullptr;
  float *q = nullptr, *o = nullptr, *ss = nullptr;
  std::int64_t sd = 0, s2 = 0;
  int S = 0, d = 0;
  AttnWs(Arena& a, const AttnDims& dm, int threads)
      : sd(static_cast<std::int64_t>(dm.S) * std::max(dm.d, dm.v_dim())), s2(static_cast<std::int64_t>(dm.S) * dm.S),
        S(dm.S), d(std::max(dm.d, dm.v_dim())) {
    kv = a.take<float>(threads * sd);
    acc = a.take<float>(threads * sd);
    row = a.take<float>(static_cast<std::int64_t>(threads) * 2 * S);
    vec = a.take<float>(static_cast<std::int64_t>(threads) * 2 * d);
    q = a.take<float>(threads * sd);
    o = a.take<float>(threads * sd);
    ss = a.take<float>(threads * s2);
  }
  float* kv_of(int lane) const { return kv + lane * sd; }
  float* acc_of(int lane) const { return acc + lane * sd; }
  float* row_of(int lane) const { return row + static_cast<std::int64_t>(lane) * 2 * S; }
  float* row2_of(int lane) const { return row_of(lane) + S; }
  float* vec_of(int lane) const { return vec + static_cast<std::int64_t>(lane) * 2 * d; }
  float* q_of(int lane) const { return q + lane * sd; }
  float* o_of(int lane) const { return o + lane * sd; }
  float* ss_of(int lane) const { return ss + lane * s2; }
};

struct Layout {
  std::int64_t width;  // qkv row width
  std::int64_t ctx_width;
  int S, d, dv, heads, kv_heads, group;  // dv: the value heads' (and the context's heads') width
  explicit Layout(const AttnDims& a)
      : width(a.qkv_width()), ctx_width(a.ctx_width()), S(a.S), d(a.d), dv(a.v_dim()), heads(a.heads),
        kv_heads(a.kv_heads), group(a.group()) {}
  std::int64_t row(int b, int i) const { return (static_cast<std::int64_t>(b) * S + i) * width; }
  std::int64_t q_col(int h) const { return static_cast<std::int64_t>(h) * d; }
  std::int64_t k_col(int g) const { return static_cast<std::int64_t>(heads + g) * d; }
  std::int64_t v_col(int g) const { return static_cast<std::int64_t>(heads + kv_heads) * d + static_cast<std::int64_t>(g) * dv; }
  // Head h's columns in the context row.
  std::int64_t ctx_col(int h) const { return static_cast<std::int64_t>(h) * dv; }
  std::int64_t prob_row(int b, int h, int i) const {
    return ((static_cast<std::int64_t>(b) * heads + h) * S + i) * S;
  }
  std::int64_t ctx(int b, int i, int h) const {
    return (static_cast<std::int64_t>(b) * S + i) * ctx_width + ctx_col(h);
  }
};

inline void check_attn(const AttnDims& a, const char* op, const Tensor& qkv, const char* qkv_name) {
  check_dims(a, op);
  check_float(qkv, op, qkv_name,
              static_cast<std::int64_t>(a.B) * a.S * a.qkv_width());
}

inline std::int64_t probs_n(const AttnDims& a) {
  return static_cast<std::int64_t>(a.B) * a.heads * a.S * a.S;
}

inline std::int64_t ctx_n(const AttnDims& a) {
  return static_cast<std::int64_t>(a.B) * a.S * a.ctx_width();
}

}  // namespace remat::cpu::attn
