#include "core/backend/cuda/gemm.h"

#include <climits>
#include <cstdint>

#include "core/backend/cuda/cuda_check.h"
#include "core/util/error.h"
#include "kernels/add.cuh"

namespace remat::cuda {

namespace {

// Largest power of two (up to 256) dividing the address.
int alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  int al = 256;
  while (al > 1 && (a % static_cast<std::uintptr_t>(al)) != 0) al /= 2;
  return al;
}

std::string dims(int m, int n, int k) {
  return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k);
}

void check_ld(std::int64_t ld, const char* name, const char* what) {
  if (ld <= 0 || ld > INT_MAX)
    throw Error(std::string("GEMM for ") + what + ": leading dimension " + name + "=" +
                std::to_string(ld) + " is out of range");
}

}  // namespace

Gemm::Gemm(cudaStream_t stream) : stream_(stream) {
  REMAT_CUBLAS(cublasLtCreate(&lt_));
  REMAT_CUBLAS(cublasCreate(&blas_));
  // cublasSetStream resets the workspace to cuBLAS's own pool, so it comes first; the fixed
  // workspace is installed by set_workspace.
  REMAT_CUBLAS(cublasSetStream(blas_, stream_));
  REMAT_CUBLAS(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));  // no TF32
  REMAT_CUBLAS(cublasSetAtomicsMode(blas_, CUBLAS_ATOMICS_NOT_ALLOWED));
  REMAT_CUBLAS(cublasSetPointerMode(blas_, CUBLAS_POINTER_MODE_HOST));
}

Gemm::~Gemm() {
  for (auto& [key, p] : plans_) {
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.d) cublasLtMatrixLayoutDestroy(p.d);
    if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  }
  if (blas_) cublasDestroy(blas_);
  if (lt_) cublasLtDestroy(lt_);
}

void Gemm::set_workspace(void* p, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (p && reinterpret_cast<std::uintptr_t>(p) % 256 != 0)
    throw Error("GEMM workspace must be 256-byte aligned");
  if (bytes != ws_bytes_) {
    // Algorithms were chosen for the old size; choose again.
    for (auto& [key, pl] : plans_) {
      if (pl.a) cublasLtMatrixLayoutDestroy(pl.a);
      if (pl.b) cublasLtMatrixLayoutDestroy(pl.b);
      if (pl.d) cublasLtMatrixLayoutDestroy(pl.d);
      if (pl.desc) cublasLtMatmulDescDestroy(pl.desc);
    }
    plans_.clear();
  }
  ws_ = p;
  ws_bytes_ = p ? bytes : 0;
  REMAT_CUBLAS(cublasSetWorkspace(blas_, ws_, ws_bytes_));
}

Gemm::Plan& Gemm::plan(const Key& key, bool ta, bool tb, int m, int n, int k, cudaDataType at,
                       std::int64_t lda, cudaDataType bt, std::int64_t ldb, cudaDataType dt,
                       std::int64_t ldd, bool bias, int align_a, int align_b, int align_d,
                       int align_bias) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan p;
  REMAT_CUBLAS(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  REMAT_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
                                              sizeof opa));
  REMAT_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
                                              sizeof opb));
  if (bias) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    REMAT_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                sizeof epi));
    cudaDataType bias_t = dt;
    REMAT_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                &bias_t, sizeof bias_t));
  }
  REMAT_CUBLAS(cublasLtMatrixLayoutCreate(&p.a, at, ta ? k : m, ta ? m : k, lda));
  REMAT_CUBLAS(cublasLtMatrixLayoutCreate(&p.b, bt, tb ? n : k, tb ? k : n, ldb));
  REMAT_CUBLAS(cublasLtMatrixLayoutCreate(&p.d, dt, m, n, ldd));

  cublasLtMatmulPreference_t pref = nullptr;
  REMAT_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  std::uint64_t ws = ws_bytes_;
  std::uint32_t aa = static_cast<std::uint32_t>(align_a), ab = static_cast<std::uint32_t>(align_b),
                ad = static_cast<std::uint32_t>(align_d);
  std::uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_MASK & ~CUBLASLT_REDUCTION_SCHEME_INPLACE;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  auto setp = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* v, std::size_t sz,
                  const char* name) {
    cublasStatus_t s2 = cublasLtMatmulPreferenceSetAttribute(pref, attr, v, sz);
    if (s2 != CUBLAS_STATUS_SUCCESS) {
      cublasLtMatmulPreferenceDestroy(pref);
      throw_cublas(s2, name, __FILE__, __LINE__);
    }
  };
  setp(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws,
       "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  setp(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa,
       "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_A_BYTES)");
  setp(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab,
       "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_B_BYTES)");
  setp(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof ad,
       "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_C_BYTES)");
  setp(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad,
       "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_D_BYTES)");
  setp(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof reduction,
       "cublasLtMatmulPreferenceSetAttribute(REDUCTION_SCHEME_MASK)");
  (void)align_bias;
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  st = cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result,
                                      &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    p.algo = result.algo;
    p.has_algo = true;
  } else if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
    throw_cublas(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  }
  return plans_.emplace(key, p).first->second;
}

void Gemm::matmul(bool ta, bool tb, int m, int n, int k, const void* A, cudaDataType at,
                  std::int64_t lda, const void* B, cudaDataType bt, std::int64_t ldb, void* D,
                  cudaDataType dt, std::int64_t ldd, float alpha, float beta, const void* bias,
                  const char* what) {
  if (m <= 0 || n <= 0 || k <= 0)
    throw Error(std::string("GEMM for ") + what + ": bad dims " + dims(m, n, k));
  check_ld(lda, "lda", what);
  check_ld(ldb, "ldb", what);
  check_ld(ldd, "ldd", what);
  std::lock_guard<std::mutex> lock(mu_);
  if (!ws_)
    throw Error(std::string("GEMM for ") + what +
                ": no workspace; allocate workspace_bytes(model) and call set_workspace");
  const int al_a = alignment(A), al_b = alignment(B), al_d = alignment(D),
            al_bias = bias ? alignment(bias) : 256;
  Key key{ta, tb, m, n, k, static_cast<int>(at), static_cast<int>(bt), static_cast<int>(dt),
          lda, ldb, ldd, bias != nullptr, al_a, al_b, al_d, al_bias, ws_bytes_};
  Plan& p = plan(key, ta, tb, m, n, k, at, lda, bt, ldb, dt, ldd, bias != nullptr, al_a, al_b,
                 al_d, al_bias);
  if (p.has_algo) {
    if (bias)
      REMAT_CUBLAS(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                  &bias, sizeof bias));
    cublasStatus_t s = cublasLtMatmul(lt_, p.desc, &alpha, A, p.a, B, p.b, &beta, D, p.d, D, p.d,
                                      &p.algo, ws_, ws_bytes_, stream_);
    if (s != CUBLAS_STATUS_SUCCESS)
      throw Error(std::string("cuBLAS error in cublasLtMatmul for ") + what + " (" +
                  dims(m, n, k) + "): " + cublasGetStatusName(s) + ": " +
                  cublasGetStatusString(s));
    return;
  }
  // No cuBLASLt algorithm for this layout: cublasGemmEx, then the bias in our own kernel.
  ++fallbacks_;
  cublasStatus_t s = cublasGemmEx(blas_, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  m, n, k, &alpha, A, at, static_cast<int>(lda), B, bt,
                                  static_cast<int>(ldb), &beta, D, dt, static_cast<int>(ldd),
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLAS error in cublasGemmEx for ") + what + " (" + dims(m, n, k) +
                "): " + cublasGetStatusName(s) + ": " + cublasGetStatusString(s));
  if (bias) {
    if (ldd != m)
      throw Error(std::string("GEMM for ") + what + ": bias fallback needs ldd == m");
    kernels::add_bias_cols(dt == CUDA_R_16BF ? kernels::FType::BF16 : kernels::FType::F32, D,
                           bias, n, m, stream_);
  }
}

void Gemm::batched(bool ta, bool tb, int m, int n, int k, const void* A, cudaDataType at,
                   std::int64_t lda, std::int64_t stride_a, const void* B, cudaDataType bt,
                   std::int64_t ldb, std::int64_t stride_b, void* C, cudaDataType ct,
                   std::int64_t ldc, std::int64_t stride_c, int batch, float alpha, float beta,
                   const char* what) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0)
    throw Error(std::string("batched GEMM for ") + what + ": bad dims " + dims(m, n, k) +
                " batch=" + std::to_string(batch));
  check_ld(lda, "lda", what);
  check_ld(ldb, "ldb", what);
  check_ld(ldc, "ldc", what);
  std::lock_guard<std::mutex> lock(mu_);
  if (!ws_)
    throw Error(std::string("batched GEMM for ") + what +
                ": no workspace; allocate workspace_bytes(model) and call set_workspace");
  cublasStatus_t s = cublasGemmStridedBatchedEx(
      blas_, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A,
      at, static_cast<int>(lda), stride_a, B, bt, static_cast<int>(ldb), stride_b, &beta, C, ct,
      static_cast<int>(ldc), stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLAS error in cublasGemmStridedBatchedEx for ") + what + " (" +
                dims(m, n, k) + " batch=" + std::to_string(batch) + "): " +
                cublasGetStatusName(s) + ": " + cublasGetStatusString(s));
}

std::string Gemm::cublas_version() const {
  int v = 0;
  if (cublasGetVersion(blas_, &v) != CUBLAS_STATUS_SUCCESS) return "unknown";
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

std::string Gemm::cublaslt_version() const {
  const std::size_t v = cublasLtGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

std::size_t Gemm::plans() const { return plans_.size(); }

}  // namespace remat::cuda
