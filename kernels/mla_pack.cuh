// Multi-head latent attention's packing (the MlaPack op, core/backend/backend.h; layout, rotation
// and the size check: core/backend/mla_pack.h) on the device. Forward: q [M, heads·d], kv
// [M, heads·(d - r + dv)] and k_pe [M, r] into the packed q|k|v [M, 2·heads·d + heads·dv] the
// attention ops read. Backward: dq, dkv and dk_pe (the heads' sum, taken before one inverse
// rotation) from the packed row's gradient. One block per token row; fp32 arithmetic, fp32 or
// bf16 storage (all four tensors alike).
//
// cos and sin come as device tables [S, r/2] each (row s, pair i), made on the host exactly as the
// CPU backend makes them (core/backend/cuda/cuda_mla.cpp), so both backends give the same bits.
#pragma once
#include "core/backend/mla_pack.h"
#include "kernels/launch.cuh"
#include "kernels/scratch_bytes.h"  // mla_pack_scratch_bytes: the two tables

namespace remat::kernels {

void mla_pack_fwd(FType t, const void* q, const void* kv, const void* kpe, void* out,
                  const MlaPackDims& m, const float* cs, const float* sn, cudaStream_t s);

// acc_q, acc_kv, acc_pe: add into dq, dkv, dk_pe (rounding once) instead of storing.
void mla_pack_bwd(FType t, const void* dout, void* dq, void* dkv, void* dpe, const MlaPackDims& m,
                  const float* cs, const float* sn, bool acc_q, bool acc_kv, bool acc_pe,
                  cudaStream_t s);

}  // namespace remat::kernels
