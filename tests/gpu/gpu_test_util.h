// Shared pieces of the GPU tests: the skip when there is no usable device, a pair of backends
// (CPU reference and CUDA) holding the same tensors, uploads of identical bytes to both, and
// the relative L2 error the comparisons use.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_entry.h"

namespace remat::gputest {

// Usable CUDA devices (0 with the reason in *why).
int device_count(std::string* why);

#define REMAT_REQUIRE_GPU()                                                                    \
  do {                                                                                         \
    std::string remat_why_;                                                                    \
    if (::remat::gputest::device_count(&remat_why_) <= 0)                                      \
      GTEST_SKIP() << "no usable CUDA device: " << remat_why_;                                 \
  } while (0)

// Allowed relative L2 error of a GPU result against the CPU reference.
inline double tol(DType dt) { return dt == DType::BF16 ? 1e-2 : 1e-5; }

// Values as the bytes of a tensor of type dt (bf16 rounded to nearest even).
std::vector<std::uint8_t> to_bytes(DType dt, const std::vector<float>& v);
std::vector<float> uniform(std::int64_t n, float lo, float hi, std::uint64_t seed);

// sqrt(sum (a - ref)^2 / sum ref^2); infinity when a non-finite value appears in only one side
// or the sizes differ.
double rel_l2(const std::vector<float>& a, const std::vector<float>& ref);

// The same tensor on both backends.
struct Both {
  Tensor c, g;
  DType dt = DType::F32;
  std::int64_t n = 0;
};

class Dual {
 public:
  explicit Dual(std::size_t workspace_bytes = std::size_t{512} << 20);
  ~Dual();
  Dual(const Dual&) = delete;
  Dual& operator=(const Dual&) = delete;

  Both alloc(DType dt, std::int64_t n);
  Both upload(DType dt, const std::vector<float>& v);
  Both random(DType dt, std::int64_t n, float lo, float hi, std::uint64_t seed);
  // Every byte 0xFF (NaN in fp32 and bf16): outputs an op fails to write stay NaN.
  Both poisoned(DType dt, std::int64_t n);
  Tensor gpu_alloc(DType dt, std::int64_t n, Space s = Space::Device);
  Tensor cpu_alloc(DType dt, std::int64_t n);

  std::vector<float> cpu_read(const Both& b);
  std::vector<float> gpu_read(const Both& b);
  std::vector<std::uint8_t> gpu_bytes(const Tensor& t);
  double rel(const Both& b);  // GPU against CPU

  CpuBackend cpu{2};
  std::unique_ptr<cuda::CudaBackend> gpu;

 private:
  struct Owned {
    Backend* be;
    Tensor t;
  };
  std::vector<Owned> owned_;
};

// An attention test's shape: dtype, batch, sequence, heads, kv heads, head width, attention
// dropout, AttnDims::window (0: plain causal) and AttnDims::softcap (0: none); its test name.
struct AttnCase {
  DType dt;
  int B, S, heads, kv, d;
  float p;
  int window = 0;  // the band: > 0 a window, < 0 chunks of -window tokens
  float cap = 0.0f;
};
inline std::string attn_case_name(const ::testing::TestParamInfo<AttnCase>& i) {
  const AttnCase& c = i.param;
  std::string s = c.dt == DType::BF16 ? "bf16" : "fp32";
  s += "_B" + std::to_string(c.B) + "_S" + std::to_string(c.S) + "_h" + std::to_string(c.heads) +
       "_kv" + std::to_string(c.kv) + "_d" + std::to_string(c.d);
  if (c.p > 0) s += "_drop";
  if (c.window > 0) s += "_w" + std::to_string(c.window);
  if (c.window < 0) s += "_chunk" + std::to_string(-c.window);
  if (c.cap > 0) s += "_cap" + std::to_string(static_cast<int>(c.cap));
  return s;
}

// The case's attention: scores scaled by 1/sqrt(d), its window and soft-cap.
inline AttnDims attn_dims(const AttnCase& c) {
  AttnDims a;
  a.B = c.B, a.S = c.S, a.heads = c.heads, a.kv_heads = c.kv, a.d = c.d;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  a.window = c.window > 0 ? c.window : 0;
  a.chunk = c.window < 0 ? -c.window : 0;
  a.softcap = c.cap;
  return a;
}

}  // namespace remat::gputest
