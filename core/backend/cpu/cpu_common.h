// Internals of the CPU backend shared by its op files: element access for bf16/fp32 tensors,
// argument checks, the workspace arena, the thread pool and batched Philox bits.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cpu/cpu_simd.h"
#include "core/backend/cpu/cpu_thread_pool.h"
#include "core/backend/tensor.h"
#include "core/util/bf16.h"
#include "core/util/error.h"
#include "core/util/philox.h"

namespace remat::cpu {

// Fixed tile and chunk sizes: constants, never derived from memory or thread counts, so the
// rounding of every result depends only on the shapes.
constexpr int kFlashTile = 64;     // keys per online-softmax step of flash attention
constexpr int kHeadRows = 128;     // rows of fp32 logits the head holds at once
constexpr int kColBlock = 64;      // columns per stack accumulator in column reductions

// A float-typed tensor (bf16 or fp32) read and written as floats; rounding happens in set().
struct FV {
  void* p = nullptr;
  bool bf = false;
  FV() = default;
  explicit FV(const Tensor& t) : p(t.data), bf(t.dtype == DType::BF16) {}
  float operator[](std::int64_t i) const {
    return bf ? bf16_to_float(static_cast<const std::uint16_t*>(p)[i])
              : static_cast<const float*>(p)[i];
  }
  void set(std::int64_t i, float v) const {
    if (bf) static_cast<std::uint16_t*>(p)[i] = float_to_bf16(v);
    else static_cast<float*>(p)[i] = v;
  }
  // Stores v, or adds it to what is there when acc (rounding once).
  void put(std::int64_t i, float v, bool acc) const { set(i, acc ? (*this)[i] + v : v); }
  FV offset(std::int64_t n) const {
    FV r = *this;
    r.p = static_cast<char*>(p) + n * (bf ? 2 : 4);
    return r;
  }
  simd::Ref ref() const { return {p, bf}; }
};

// --- argument checks (throw remat::Error; called before any loop). Compute ops take tensors in
// the device space only, as on a GPU; need is the least element count. ---
std::string describe_tensor(const Tensor& t);  // "bf16[1024] in device space"
void check_float(const Tensor& t, const char* op, const char* name, std::int64_t need);
void check_dtype(const Tensor& t, DType dt, const char* op, const char* name, std::int64_t need);
void check_dims(const AttnDims& a, const char* op);

// --- workspace arena: 64-byte aligned pieces carved from the workspace in a fixed order. A
// measuring arena (no base) only adds up sizes, so workspace_bytes uses the very same layout
// code as the ops. ---
class Arena {
 public:
  Arena() = default;  // measuring
  Arena(const Tensor& ws, const char* op) : base_(static_cast<char*>(ws.data)), cap_(ws.bytes()),
                                            measure_(false), op_(op) {}
  Arena(void* base, std::uint64_t cap, const char* op) : base_(static_cast<char*>(base)), cap_(cap),
                                                         measure_(false), op_(op) {}
  template <class T>
  T* take(std::int64_t n) {
    std::uint64_t b = (static_cast<std::uint64_t>(n) * sizeof(T) + 63) / 64 * 64;
    if (measure_) {
      used_ += b;
      return nullptr;
    }
    if (used_ + b > cap_ || (b > 0 && base_ == nullptr))
      throw Error(std::string("cpu ") + op_ + ": workspace too small (" + std::to_string(cap_) +
                  " bytes, needs at least " + std::to_string(used_ + b) +
                  "); allocate workspace_bytes(model) and call set_workspace");
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += b;
    return p;
  }
  std::uint64_t used() const { return used_; }

 private:
  char* base_ = nullptr;
  std::uint64_t cap_ = 0, used_ = 0;
  bool measure_ = true;
  const char* op_ = "";
};

// OpenBLAS's thread count is global to the process; GEMM ops set it back to 1 (each lane of the
// pool calls it single-threaded) when something else in the process changed it.
void ensure_blas_threads(int threads);

// Calls f(begin, end, lane) on contiguous fixed parts of [0, n). Runs on the caller alone when
// n <= grain. Each output must be produced by one part, so results do not depend on the split.
template <class F>
void parallel_for(ThreadPool& pool, std::int64_t n, std::int64_t grain, F&& f) {
  if (n <= 0) return;
  std::int64_t parts = grain > 0 ? (n + grain - 1) / grain : n;
  if (parts > pool.size()) parts = pool.size();
  if (parts <= 1) {
    f(std::int64_t{0}, n, 0);
    return;
  }
  struct Ctx {
    F* f;
    std::int64_t n, parts;
  } ctx{&f, n, parts};
  pool.run(static_cast<int>(parts), [](void* c, int lane) {
    auto* x = static_cast<Ctx*>(c);
    std::int64_t b = x->n * lane / x->parts, e = x->n * (lane + 1) / x->parts;
    if (b < e) (*x->f)(b, e, lane);
  }, &ctx);
}

// dst[i] = src[i], or dst[i] + src[i] when acc (rounded once), for any float dtypes; the SIMD
// kernel when one is active, else the reference loop (the same bits).
inline void copy_floats(ThreadPool& pool, FV src, FV dst, std::int64_t n, bool acc,
                        std::int64_t grain = 1 << 15) {
  const simd::Kernels* k = simd::active();
  parallel_for(pool, n, grain, [&](std::int64_t b, std::int64_t e, int) {
    if (k) return k->copy(src.ref(), dst.ref(), b, e, acc);
    for (std::int64_t i = b; i < e; ++i) dst.put(i, src[i], acc);
  });
}

// Philox bits for elements [start, start + n) of the mask keyed by `key`; equals
// philox_bits(key, start + i) for each i, with one Philox call per four elements.
inline void philox_fill(const DropoutKey& key, std::uint64_t start, std::int64_t n,
                        std::uint32_t* out) {
  if (key.run) {  // run by run, each a contiguous range of the global mask
    DropoutKey k = key;
    k.run = 0;
    while (n > 0) {
      const std::uint64_t in_run = start % key.run;
      const std::int64_t take = static_cast<std::int64_t>(
          std::min<std::uint64_t>(static_cast<std::uint64_t>(n), key.run - in_run));
      k.offset = key.offset + start / key.run * key.stride;
      philox_fill(k, in_run, take, out);
      start += static_cast<std::uint64_t>(take);
      out += take;
      n -= take;
    }
    return;
  }
  const std::uint64_t first = start + key.offset;
  std::uint64_t idx = first, end = first + static_cast<std::uint64_t>(n);
  while (idx < end) {
    Philox4 c;
    c.v[0] = static_cast<std::uint32_t>(idx >> 2);
    c.v[1] = static_cast<std::uint32_t>(idx >> 34);
    c.v[2] = key.step;
    c.v[3] = (key.block << 8) ^ key.site;
    Philox4 r = philox4x32(c, static_cast<std::uint32_t>(key.seed),
                           static_cast<std::uint32_t>(key.seed >> 32));
    std::uint64_t group_end = (idx | 3u) + 1;
    for (; idx < end && idx < group_end; ++idx) out[idx - first] = r.v[idx & 3u];
  }
}

// The keep flags (bits >= thr) of elements [start, start + n) of the mask keyed by `key` into
// out[0, n), run by run, on kernel set k: the bytes philox_fill's bits give.
inline void dropout_keep(const simd::Kernels& k, const DropoutKey& key, std::uint64_t start,
                         std::int64_t n, std::uint32_t thr, std::uint8_t* out) {
  const std::uint32_t c3 = (key.block << 8) ^ key.site;
  while (n > 0) {
    std::int64_t take = n;
    std::uint64_t first = start + key.offset;
    if (key.run) {
      const std::uint64_t in_run = start % key.run;
      take = static_cast<std::int64_t>(
          std::min<std::uint64_t>(static_cast<std::uint64_t>(n), key.run - in_run));
      first = key.offset + start / key.run * key.stride + in_run;
    }
    k.dropout_keep(first, take, key.step, c3, key.seed, thr, out);
    start += static_cast<std::uint64_t>(take);
    out += take;
    n -= take;
  }
}

inline float dropout_scale(float p) { return p > 0.0f ? 1.0f / (1.0f - p) : 1.0f; }

// a . b over n floats in eight interleaved partial sums (lanes c mod 8, added pairwise at the
// end), so the products vectorize and no add waits for the one before it; the order is fixed.
inline float dot(const float* a, const float* b, int n) {
  float p[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int c = 0;
  for (; c + 8 <= n; c += 8)
    for (int k = 0; k < 8; ++k) p[k] += a[c + k] * b[c + k];
  for (int k = 0; c < n; ++c, ++k) p[k] += a[c] * b[c];
  return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
}

// Soft-caps (Gemma 2) as cap * t with t = tanh(raw / cap), and d(cap * t) / d raw = 1 - t^2:
// x[k] = tanh(x[k] / cap) for n values (cpu_tanh.cpp; SIMD, the same function for every value).
void tanh_of_quotient(float* x, std::int64_t n, float cap);
// Soft-capped in place: s[k] = cap * tanh(s[k] / cap).
inline void soft_cap(float* s, std::int64_t n, float cap) {
  tanh_of_quotient(s, n, cap);
  for (std::int64_t k = 0; k < n; ++k) s[k] *= cap;
}

// Attention scores of one query: s[c] = (q . K[j0 + c]) * scale for c < n (K: rows of d floats).
inline void scaled_scores(const float* q, const float* K, std::int64_t j0, int n, int d, float scale,
                          float* s) {
  for (int c = 0; c < n; ++c) s[c] = dot(q, K + (j0 + c) * d, d) * scale;
}

// The tanh GELU's t = tanh(gelu_tanh_arg(x[start + k])) for k < n <= kTanhChunk (core/util/gelu.h).
constexpr int kTanhChunk = 256;
void gelu_tanh_t(FV x, std::int64_t start, int n, float* t);
// f(i, x[i], t) for i in [b, e) with t = tanh(gelu_tanh_arg(x[i])), the tanh kTanhChunk at a time.
template <class F>
void for_gelu_tanh(FV x, std::int64_t b, std::int64_t e, F&& f) {
  float t[kTanhChunk];
  for (std::int64_t i0 = b; i0 < e; i0 += kTanhChunk) {
    const int c = static_cast<int>(std::min<std::int64_t>(kTanhChunk, e - i0));
    gelu_tanh_t(x, i0, c, t);
    for (int k = 0; k < c; ++k) f(i0 + k, x[i0 + k], t[k]);
  }
}

// Rows b*S .. b*S + S - 1, columns [col, col + d) of a [B*S, row_width] tensor (a head of qkv,
// ctx or their gradients) as fp32 [S, d].
void stage_kv_head(FV qkv, std::int64_t row_width, std::int64_t col, int b, int S, int d,
                   float* out);
// The reverse, adding: t[row b*S + s, col + c] += in[s, c], rounded once.
void add_head(const float* in, FV t, std::int64_t row_width, std::int64_t col, int b, int S,
              int d);

}  // namespace remat::cpu
