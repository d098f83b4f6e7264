// CudaBackend: multi-head latent attention's packing (MlaPack; the op: core/backend/backend.h,
// the layout and rotation both backends share: core/backend/mla_pack.h, the kernels:
// kernels/mla_pack.cu). The cos and sin tables are made here, on the host and by the host
// compiler, with the CPU backend's very expressions (core/backend/cpu/cpu_mla.cpp: std::cos and
// std::sin of the fp32 angle, then scaled), so that the device rotates by the same bits; a
// device cos would differ from the C library's in the last place now and then.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/backend/cuda/cuda_args.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/mla_pack.h"
#include "kernels/mla_pack.cuh"

namespace remat::cuda {

namespace {

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The operands' checks, as the CPU's (element counts; one dtype for the four on CUDA).
MlaPackDims check_pack(const OpArgs& a, const char* op, const Tensor& q, const Tensor& kv,
                       const Tensor& kpe, const Tensor& out) {
  const MlaPackDims m = mla_pack_dims(a.attn, a.rope, "cuda", op);
  check_float(q, op, "q", m.rows * m.q_width());
  check_float(kv, op, "kv", m.rows * m.kv_width());
  check_float(kpe, op, "k_pe", m.rows * m.r);
  check_float(out, op, "qkv", m.rows * m.out_width());
  check_same(q, {&kv, &kpe, &out}, op);
  return m;
}

}  // namespace

const float* CudaBackend::mla_tables(const MlaPackDims& m, const RopeTable& rope, const char* op) {
  const int half = m.r / 2;
  std::vector<std::uint32_t> key;
  key.reserve(static_cast<std::size_t>(half) + 3);
  key.push_back(static_cast<std::uint32_t>(m.S));
  key.push_back(static_cast<std::uint32_t>(half));
  key.push_back(bits(rope.attention_scaling));
  for (int i = 0; i < half; ++i) key.push_back(bits(rope.inv_freq[i]));
  const std::size_t n = static_cast<std::size_t>(m.S) * static_cast<std::size_t>(half);
  if (key != mla_key_) {
    mla_tables_.assign(2 * n, 0.0f);
    float* cs = mla_tables_.data();
    float* sn = cs + n;
    for (std::int64_t s = 0; s < m.S; ++s)
      for (int i = 0; i < half; ++i) {
        // As cpu_mla.cpp (Pack::cos_sin): the angle in fp32, cos and sin scaled after.
        const float ang = static_cast<float>(s) * rope.inv_freq[i];
        cs[s * half + i] = std::cos(ang) * rope.attention_scaling;
        sn[s * half + i] = std::sin(ang) * rope.attention_scaling;
      }
    mla_key_ = std::move(key);
  }
  char* dst = scratch(kernels::mla_pack_scratch_bytes(m.S, m.r), op);
  // From pageable memory: the call returns once the bytes are staged, so the tables may change
  // after it; ordered on the compute stream before the kernel that reads them.
  REMAT_CUDA(cudaMemcpyAsync(dst, mla_tables_.data(), 2 * n * sizeof(float),
                             cudaMemcpyHostToDevice, compute_));
  return reinterpret_cast<const float*>(dst);
}

// in[0] q, in[1] kv, in[2] k_pe -> out[0] the packed q|k|v.
void CudaBackend::fwd_MlaPack(const OpArgs& a) {
  const char* op = "mla_pack_fwd";
  const MlaPackDims m = check_pack(a, op, *a.in[0], *a.in[1], *a.in[2], *a.out[0]);
  activate();
  const float* cs = mla_tables(m, a.rope, op);
  const float* sn = cs + static_cast<std::int64_t>(m.S) * (m.r / 2);
  kernels::mla_pack_fwd(ft(*a.in[0]), a.in[0]->data, a.in[1]->data, a.in[2]->data,
                        a.out[0]->data, m, cs, sn, compute_);
}

// dout[0] -> din[0] dq (acc[0]), din[1] dkv (acc[1]), din[2] dk_pe (acc[2]).
void CudaBackend::bwd_MlaPack(const OpArgs& a) {
  const char* op = "mla_pack_bwd";
  const MlaPackDims m = check_pack(a, op, *a.din[0], *a.din[1], *a.din[2], *a.dout[0]);
  activate();
  const float* cs = mla_tables(m, a.rope, op);
  const float* sn = cs + static_cast<std::int64_t>(m.S) * (m.r / 2);
  kernels::mla_pack_bwd(ft(*a.dout[0]), a.dout[0]->data, a.din[0]->data, a.din[1]->data,
                        a.din[2]->data, m, cs, sn, a.acc[0], a.acc[1], a.acc[2], compute_);
}

}  // namespace remat::cuda
