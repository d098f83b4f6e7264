// Helpers for the CPU backend tests: owned device tensors, random data, finite differences.
#pragma once
#include <gtest/gtest.h>

#include "core/graph/op_table.h"
#include "core/model/rope_scaling.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/util/bf16.h"
#include "core/util/error.h"

namespace remat::cputest {

// Element counts of attention's packed q|k|v, its probabilities and its context.
inline std::int64_t qkv_n(const AttnDims& a) { return static_cast<std::int64_t>(a.B) * a.S * a.qkv_width(); }
inline std::int64_t probs_n(const AttnDims& a) { return static_cast<std::int64_t>(a.B) * a.heads * a.S * a.S; }
inline std::int64_t ctx_n(const AttnDims& a) { return static_cast<std::int64_t>(a.B) * a.S * a.ctx_width(); }
// Causal attention of B sequences of S, heads over kv heads of width d, scores scaled by
// 1/sqrt(d), with an optional band (AttnDims::band(): > 0 a window, < 0 chunks of -band tokens)
// and soft-cap.
inline AttnDims attn_dims(int B, int S, int heads, int kv, int d, int band = 0, float softcap = 0.0f) {
  AttnDims a;
  a.B = B, a.S = S, a.heads = heads, a.kv_heads = kv, a.d = d;
  a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  a.window = band > 0 ? band : 0;
  a.chunk = band < 0 ? -band : 0;
  a.softcap = softcap;
  return a;
}

// A backend plus the tensors a test made; frees them at the end.
class Env {
 public:
  explicit Env(int threads = 2, std::uint64_t ws_bytes = 32u << 20) : be(threads) {
    if (ws_bytes) set_workspace_bytes(ws_bytes);
  }
  ~Env() {
    for (const Tensor& t : owned_) be.memory(t.space).deallocate(t.data, t.bytes());
  }
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  Tensor make(DType dt, std::int64_t n, Space sp = Space::Device) {
    Tensor t = allocate(dt, n, sp);
    std::memset(t.data, 0, t.bytes());
    return t;
  }
  Tensor from(const std::vector<float>& v, DType dt = DType::F32) {
    Tensor t = make(dt, static_cast<std::int64_t>(v.size()));
    set(t, v);
    return t;
  }
  Tensor ints(const std::vector<std::int32_t>& v) {
    Tensor t = make(DType::I32, static_cast<std::int64_t>(v.size()));
    std::memcpy(t.data, v.data(), v.size() * 4);
    return t;
  }
  void set(const Tensor& t, const std::vector<float>& v) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (t.dtype == DType::BF16) t.as<std::uint16_t>()[i] = float_to_bf16(v[i]);
      else t.as<float>()[i] = v[i];
    }
  }
  std::vector<float> get(const Tensor& t) {
    std::vector<float> v;
    be.read(t, v);
    return v;
  }
  std::vector<std::uint8_t> bytes(const Tensor& t) {
    std::vector<std::uint8_t> b(t.bytes());
    be.read_bytes(t, b.data());
    return b;
  }
  // The backend's scratch, not zeroed (the engine's is not either): a test touches only the pages
  // its kernels write. Zeroing 32 MiB for every Env was most of the sanitized kernel tests' time.
  void set_workspace_bytes(std::uint64_t bytes) {
    be.set_workspace(allocate(DType::U8, static_cast<std::int64_t>(bytes), Space::Device));
  }

  CpuBackend be;

 private:
  // Memory of the backend's, freed with the Env; not zeroed.
  Tensor allocate(DType dt, std::int64_t n, Space sp) {
    Tensor t;
    t.dtype = dt;
    t.numel = n;
    t.space = sp;
    t.data = be.memory(sp).allocate(t.bytes());
    owned_.push_back(t);
    return t;
  }
  std::vector<Tensor> owned_;
};

inline std::vector<float> randv(std::size_t n, std::uint32_t seed, float lo = -1.0f,
                                float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// Values exactly representable in bf16.
inline std::vector<float> bf16v(std::vector<float> v) {
  for (float& x : v) x = round_bf16(x);
  return v;
}

inline double dotd(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// The arguments of an activation op of the op table: in[0] x -> out[0] y over M rows of K
// (elementwise ops: K = 1); backward dout[0] dy -> din[0] dx, added into when acc.
inline OpArgs act_args(const Tensor& x, const Tensor& y, std::int64_t M, int K = 1) {
  OpArgs a;
  a.in[0] = &x;
  a.out[0] = &y;
  a.M = M;
  a.K = K;
  return a;
}
inline OpArgs act_bwd_args(const Tensor& x, const Tensor& dy, const Tensor& dx, std::int64_t M,
                           int K = 1, bool acc = false) {
  OpArgs a;
  a.in[0] = &x;
  a.dout[0] = &dy;
  a.din[0] = &dx;
  a.acc[0] = acc;
  a.M = M;
  a.K = K;
  return a;
}

// Central differences of loss() with respect to x[i] for the sampled indices, compared with the
// analytic gradient: |fd - an| <= atol + rtol * max(|fd|, |an|). x is changed and restored,
// and loss() runs once more at the end so the tensors it sets hold x again.
inline void expect_grad(const char* what, std::vector<float>& x, const std::vector<float>& an,
                        const std::function<double()>& loss, float eps = 1e-2f,
                        double atol = 2e-3, double rtol = 2e-2, int samples = 24,
                        std::uint32_t seed = 7) {
  ASSERT_EQ(x.size(), an.size()) << what;
  std::mt19937 g(seed);
  std::vector<std::size_t> idx;
  if (x.size() <= static_cast<std::size_t>(samples)) {
    for (std::size_t i = 0; i < x.size(); ++i) idx.push_back(i);
  } else {
    std::uniform_int_distribution<std::size_t> d(0, x.size() - 1);
    for (int k = 0; k < samples; ++k) idx.push_back(d(g));
  }
  for (std::size_t i : idx) {
    const float x0 = x[i];
    x[i] = x0 + eps;
    const double lp = loss();
    x[i] = x0 - eps;
    const double lm = loss();
    x[i] = x0;
    const double fd = (lp - lm) / (2.0 * static_cast<double>(eps));
    const double a = an[i];
    EXPECT_LE(std::fabs(fd - a), atol + rtol * std::max(std::fabs(fd), std::fabs(a)))
        << what << "[" << i << "]: finite difference " << fd << ", backward " << a;
  }
  loss();  // leave the tensors holding the unperturbed inputs
}

inline void expect_near_all(const char* what, const std::vector<float>& got,
                            const std::vector<double>& want, double atol, double rtol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i]), atol + rtol * std::fabs(want[i]))
        << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
}

inline void expect_near_all(const char* what, const std::vector<float>& got,
                            const std::vector<float>& want, double atol, double rtol) {
  expect_near_all(what, got, std::vector<double>(want.begin(), want.end()), atol, rtol);
}


// The default RoPE table (no scaling, whole head rotated) for op tests; `freqs` owns the values.
inline RopeTable default_rope(RopeFrequencies& freqs, int d, float theta) {
  freqs = rope_frequencies(RopeScaling{}, theta, d, 1, 1);
  return RopeTable{freqs.inv_freq.data(), d, 1.0f};
}

}  // namespace remat::cputest
