// Multi-head latent attention's packing on the CPU (MlaPack; layout and rotation: mla_pack.h).
#include <cmath>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/backend/mla_pack.h"

namespace remat {

namespace {

constexpr std::int64_t kGrain = 1 << 14;  // elements per part of the row loop

struct Pack {
  MlaPackDims m;
  const RopeTable* rope = nullptr;
  // cos and sin of pair i at sequence position s, as Hugging Face: the angle in fp32, scaled after.
  void cos_sin(std::int64_t s, int i, float& c, float& sn) const {
    const float ang = static_cast<float>(s) * rope->inv_freq[i];
    c = std::cos(ang) * rope->attention_scaling;
    sn = std::sin(ang) * rope->attention_scaling;
  }
};

Pack pack_of(const OpArgs& a, const char* op, const Tensor& q, const Tensor& kv, const Tensor& kpe, const Tensor& out) {
  Pack p{mla_pack_dims(a.attn, a.rope, "cpu", op), &a.rope};
  cpu::check_float(q, op, "q", p.m.rows * p.m.q_width());
  cpu::check_float(kv, op, "kv", p.m.rows * p.m.kv_width());
  cpu::check_float(kpe, op, "k_pe", p.m.rows * p.m.r);
  cpu::check_float(out, op, "qkv", p.m.rows * p.m.out_width());
  return p;
}

std::int64_t rows_per_part(const MlaPackDims& m) { return std::max<std::int64_t>(1, kGrain / m.out_width()); }

}  // namespace

void CpuBackend::fwd_MlaPack(const OpArgs& a) {
  const char* op = "mla_pack_fwd";
  const Pack p = pack_of(a, op, *a.in[0], *a.in[1], *a.in[2], *a.out[0]);
  const MlaPackDims& m = p.m;
  const cpu::FV q(*a.in[0]), kv(*a.in[1]), kpe(*a.in[2]), out(*a.out[0]);
  const int dn = m.nope(), half = m.r / 2;
  cpu::parallel_for(*pool_, m.rows, rows_per_part(m), [&](std::int64_t t0, std::int64_t t1, int) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t o = t * m.out_width(), qr = t * m.q_width(), kvr = t * m.kv_width(), pr = t * m.r;
      for (int h = 0; h < m.heads; ++h) {
        const std::int64_t qh = qr + m.q_col(h), kh = kvr + static_cast<std::int64_t>(h) * m.kv_head();
        for (int j = 0; j < dn; ++j) out.set(o + m.q_col(h) + j, q[qh + j]);
        for (int j = 0; j < dn; ++j) out.set(o + m.k_col(h) + j, kv[kh + j]);
        for (int j = 0; j < m.dv; ++j) out.set(o + m.v_col(h) + j, kv[kh + dn + j]);
      }
      for (int i = 0; i < half; ++i) {
        float c, s, x, y;
        p.cos_sin(t % m.S, i, c, s);
        mla_rotate(kpe[pr + 2 * i], kpe[pr + 2 * i + 1], c, s, x, y);
        for (int h = 0; h < m.heads; ++h) {
          const std::int64_t k0 = o + m.k_col(h) + dn;
          out.set(k0 + i, x);
          out.set(k0 + half + i, y);
          const std::int64_t qh = qr + m.q_col(h) + dn, q0 = o + m.q_col(h) + dn;
          float qa, qb;
          mla_rotate(q[qh + 2 * i], q[qh + 2 * i + 1], c, s, qa, qb);
          out.set(q0 + i, qa);
          out.set(q0 + half + i, qb);
        }
      }
    }
  });
}

void CpuBackend::bwd_MlaPack(const OpArgs& a) {
  const char* op = "mla_pack_bwd";
  const Pack p = pack_of(a, op, *a.din[0], *a.din[1], *a.din[2], *a.dout[0]);
  const MlaPackDims& m = p.m;
  const cpu::FV g(*a.dout[0]), dq(*a.din[0]), dkv(*a.din[1]), dpe(*a.din[2]);
  const bool aq = a.acc[0], akv = a.acc[1], ape = a.acc[2];
  const int dn = m.nope(), half = m.r / 2;
  cpu::parallel_for(*pool_, m.rows, rows_per_part(m), [&](std::int64_t t0, std::int64_t t1, int) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t o = t * m.out_width(), qr = t * m.q_width(), kvr = t * m.kv_width(), pr = t * m.r;
      for (int h = 0; h < m.heads; ++h) {
        const std::int64_t qh = qr + m.q_col(h), kh = kvr + static_cast<std::int64_t>(h) * m.kv_head();
        for (int j = 0; j < dn; ++j) dq.put(qh + j, g[o + m.q_col(h) + j], aq);
        for (int j = 0; j < dn; ++j) dkv.put(kh + j, g[o + m.k_col(h) + j], akv);
        for (int j = 0; j < m.dv; ++j) dkv.put(kh + dn + j, g[o + m.v_col(h) + j], akv);
      }
      for (int i = 0; i < half; ++i) {
        float c, s, ga = 0.0f, gb = 0.0f;
        p.cos_sin(t % m.S, i, c, s);
        for (int h = 0; h < m.heads; ++h) {
          const std::int64_t k0 = o + m.k_col(h) + dn, q0 = o + m.q_col(h) + dn, qh = qr + m.q_col(h) + dn;
          ga += g[k0 + i];
          gb += g[k0 + half + i];
          float g1, g2;
          mla_unrotate(g[q0 + i], g[q0 + half + i], c, s, g1, g2);
          dq.put(qh + 2 * i, g1, aq);
          dq.put(qh + 2 * i + 1, g2, aq);
        }
        float g1, g2;
        mla_unrotate(ga, gb, c, s, g1, g2);
        dpe.put(pr + 2 * i, g1, ape);
        dpe.put(pr + 2 * i + 1, g2, ape);
      }
    }
  });
}

}  // namespace remat
