// GEMMs for the CUDA backend. cuBLASLt for the linear layers and the head (fp32 compute; TF32
// never used; bias epilogue), one heuristic algorithm per problem chosen once and cached (with
// the pointers' alignment in the key) and a fixed user workspace, so results are reproducible.
// In-place reductions (split-K with atomics) are excluded from the heuristic. cuBLAS
// cublasGemmStridedBatchedEx for the naive attention's batched products, on the same stream and
// the same fixed workspace.
//
// All matrices are column-major, cuBLAS convention: D[m, n] = alpha op(A) op(B) + beta D.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace remat::cuda {

class Gemm {
 public:
  explicit Gemm(cudaStream_t stream);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // The fixed workspace (256-byte aligned). Must be set before any product.
  void set_workspace(void* p, std::size_t bytes);
  std::size_t workspace_size() const { return ws_bytes_; }

  // bias: m values of D's type added to every column (nullptr: none). what: the op, for errors.
  void matmul(bool ta, bool tb, int m, int n, int k, const void* A, cudaDataType at,
              std::int64_t lda, const void* B, cudaDataType bt, std::int64_t ldb, void* D,
              cudaDataType dt, std::int64_t ldd, float alpha, float beta, const void* bias,
              const char* what);

  void batched(bool ta, bool tb, int m, int n, int k, const void* A, cudaDataType at,
               std::int64_t lda, std::int64_t stride_a, const void* B, cudaDataType bt,
               std::int64_t ldb, std::int64_t stride_b, void* C, cudaDataType ct,
               std::int64_t ldc, std::int64_t stride_c, int batch, float alpha, float beta,
               const char* what);

  std::string cublas_version() const;
  std::string cublaslt_version() const;
  std::size_t plans() const;
  std::size_t fallbacks() const { return fallbacks_; }

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool has_algo = false;
  };
  using Key = std::tuple<int, int, int, int, int, int, int, int, std::int64_t, std::int64_t,
                         std::int64_t, int, int, int, int, int, std::size_t>;
  Plan& plan(const Key& key, bool ta, bool tb, int m, int n, int k, cudaDataType at,
             std::int64_t lda, cudaDataType bt, std::int64_t ldb, cudaDataType dt,
             std::int64_t ldd, bool bias, int align_a, int align_b, int align_d, int align_bias);

  cudaStream_t stream_;
  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* ws_ = nullptr;
  std::size_t ws_bytes_ = 0;
  std::mutex mu_;
  std::map<Key, Plan> plans_;
  std::size_t fallbacks_ = 0;
};

}  // namespace remat::cuda
