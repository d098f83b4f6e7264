// bf16 GEMMs through oneDNN's matmul: bf16 operands read as they are stored (no widening to
// fp32), products summed in fp32, an fp32 result. On CPUs with AMX or AVX512-BF16 oneDNN runs them
// on the bf16 matrix units; elsewhere the CPU backend keeps OpenBLAS's sgemm on widened operands.
//
// Each call runs on the calling lane only: oneDNN's own OpenMP threading is held at one thread in
// every lane, so the pool's lanes stay the only threads doing work, as with sgemm1. A matmul's
// bits depend on its shape only, so a GEMM split over a fixed number of lanes gives the same bits
// on every run; they differ from the sgemm path's by summation order.
//
// REMAT_GEMM picks the path when the first GEMM runs: `auto` (default: dnnl where the CPU has bf16
// matrix instructions, else openblas), `openblas` (every GEMM through sgemm, bf16 operands
// widened), or `dnnl` (bf16 GEMMs through oneDNN whatever the CPU). fp32 GEMMs always use sgemm.
#pragma once
#include <cstdint>
#include <string>

namespace remat::cpu {

enum class GemmPath { OpenBlas, Dnnl };

// The path `spec` names ("auto", "openblas", "dnnl"); throws remat::Error for anything else.
GemmPath gemm_path_from(const std::string& spec);
// The active path (REMAT_GEMM, read once). Throws remat::Error for a bad REMAT_GEMM.
GemmPath gemm_path();
// Replaces the active path; for tests and benchmarks.
void set_gemm_path(GemmPath p);
// "openblas", or "dnnl" with the implementation oneDNN picks, e.g. "dnnl brg:avx512_core_amx_bf16".
std::string gemm_path_name();
// Whether oneDNN has a bf16 matrix kernel for this CPU (AMX or AVX512-BF16).
bool dnnl_has_bf16_kernel();
// Whether oneDNN runs a bf16 matmul on this CPU at all (oneDNN 2.6 needs AVX-512 for one; on an
// AVX2-only CPU it has none, and REMAT_GEMM=dnnl is refused); `why` says why not.
bool dnnl_matmul_available(std::string* why = nullptr);

// Row-major C[M, N] = op(A) op(B) + beta C (beta 0 or 1) on the calling thread, A and B bf16
// (raw 16-bit words), C fp32; op(A) is [M, K], op(B) [K, N]. Operands oneDNN's bf16 kernel
// cannot read in place (a transposed A, a strided B or C) are packed into per-lane buffers first.
void bgemm1(bool trans_a, bool trans_b, int M, int N, int K, const std::uint16_t* A, int lda,
            const std::uint16_t* B, int ldb, float beta, float* C, int ldc);

}  // namespace remat::cpu
