// Multi-head latent attention's packing (the MlaPack op, backend.h): where each part of q, the
// up-projected k|v and the shared rotated key part goes in the packed q|k|v row the attention ops
// read, and the rotation of the rope dims, written once for both backends (host-and-device inline
// functions). A q or k head is d wide: d - r unrotated dims, then r rotated; a value head dv wide.
// Rotation of pair i of a rotated part x (r dims): (x[2i], x[2i + 1]) -> out[i] = x[2i] c - x[2i+1] s,
// out[i + r/2] = x[2i + 1] c + x[2i] s, with c = cos(pos · inv_freq[i]) · attention_scaling and s
// likewise (the angle in fp32, as Hugging Face's apply_rotary_pos_emb_interleave).
#pragma once
#include <cstdint>
#include <string>

#include "core/graph/op_table.h"
#include "core/util/bf16.h"  // REMAT_HD
#include "core/util/error.h"

namespace remat {

struct MlaPackDims {
  int heads = 0, d = 0, r = 0, dv = 0, S = 0;
  std::int64_t rows = 0;  // tokens: B·S
  REMAT_HD int nope() const { return d - r; }
  REMAT_HD int kv_head() const { return d - r + dv; }  // one head's k part and value in kv
  REMAT_HD std::int64_t q_width() const { return static_cast<std::int64_t>(heads) * d; }
  REMAT_HD std::int64_t kv_width() const { return static_cast<std::int64_t>(heads) * kv_head(); }
  REMAT_HD std::int64_t out_width() const { return 2 * static_cast<std::int64_t>(heads) * d + static_cast<std::int64_t>(heads) * dv; }
  REMAT_HD std::int64_t q_col(int h) const { return static_cast<std::int64_t>(h) * d; }
  REMAT_HD std::int64_t k_col(int h) const { return static_cast<std::int64_t>(heads + h) * d; }
  REMAT_HD std::int64_t v_col(int h) const { return 2 * static_cast<std::int64_t>(heads) * d + static_cast<std::int64_t>(h) * dv; }
};

// Forward rotation of one pair into (a, b) = (out[i], out[i + r/2]).
REMAT_HD void mla_rotate(float x1, float x2, float c, float s, float& a, float& b) {
#if defined(__CUDA_ARCH__)  // products rounded on their own, as on the host: no fused multiply-add
  a = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
  b = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
#else
  a = x1 * c - x2 * s;
  b = x2 * c + x1 * s;
#endif
}
// Its transpose: the gradients of (x[2i], x[2i+1]) from those of (out[i], out[i + r/2]).
REMAT_HD void mla_unrotate(float ga, float gb, float c, float s, float& g1, float& g2) {
#if defined(__CUDA_ARCH__)
  g1 = __fadd_rn(__fmul_rn(ga, c), __fmul_rn(gb, s));
  g2 = __fsub_rn(__fmul_rn(gb, c), __fmul_rn(ga, s));
#else
  g1 = ga * c + gb * s;
  g2 = gb * c - ga * s;
#endif
}

// The op's sizes from its arguments, checked alike on every backend: Error("<backend> <op>: ...").
inline MlaPackDims mla_pack_dims(const AttnDims& a, const RopeTable& rope, const char* backend, const char* op) {
  MlaPackDims m;
  m.heads = a.heads, m.d = a.d, m.r = rope.rotary_dim, m.dv = a.v_dim(), m.S = a.S;
  m.rows = static_cast<std::int64_t>(a.B) * a.S;
  if (a.B <= 0 || a.S <= 0 || a.heads <= 0 || a.kv_heads != a.heads || a.d <= 0 || a.v_dim() <= 0 || m.r <= 0 ||
      m.r % 2 != 0 || m.r > a.d || rope.inv_freq == nullptr)
    throw Error(std::string(backend) + " " + op + ": bad latent attention dims (B " + std::to_string(a.B) + ", S " +
                std::to_string(a.S) + ", heads " + std::to_string(a.heads) + ", kv_heads " + std::to_string(a.kv_heads) +
                ", d " + std::to_string(a.d) + ", dv " + std::to_string(a.v_dim()) + ", rotary " + std::to_string(m.r) +
                "): kv_heads must equal heads and the rotary dims be even, positive and at most d");
  return m;
}

}  // namespace remat
