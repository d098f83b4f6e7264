// SIMD kernels of the CPU backend, compiled by Highway once per x86 target (SSE4, AVX2, AVX-512,
// and a one-lane fallback) and chosen at run time: one binary uses the widest vectors the CPU
// has. The op files keep their scalar loops as the reference and call a kernel set instead when
// one is active (simd() != nullptr).
//
// Element-wise kernels (casts, residual, dropout, AdamW) round exactly as the reference does: the
// same operations in the same order per element, no fused multiply-add, so their bits equal the
// reference's on every target. Row reductions (norm statistics) sum in 16 fixed partial sums
// (element c into sum c mod 16, the 16 added in a fixed tree), the same on every target: they
// differ from the reference's sequential sums by rounding only, and not from one target to
// another.
//
// Kernels with transcendental functions (GELU, SwiGLU, GeGLU, softmax, cross-entropy) call SLEEF's 1-ulp vector
// functions at the target's width (cpu_simd_inl.h) and keep the reference's other roundings; they
// stay within a stated bound of the reference (whose tanh is SLEEF's too, erf/exp glibc's) and are
// deterministic for one target, but SLEEF's AVX-512, AVX2 and SSE builds may differ in the last
// bit. Softmax sums use the 16 fixed partial sums. RoPE rounds exactly as the reference.
//
// REMAT_SIMD picks the set when the first op runs: `best` (default; the CPU's widest), `scalar`
// (no kernel set: the reference loops), `baseline` (Highway's target for the compile flags), or a
// target name (`AVX3` = AVX-512, `AVX2`, `SSE4`, ...; an error where the CPU lacks it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace remat::cpu::simd {

// A float tensor's data: fp32, or bf16 when bf (the same pair as cpu::FV holds).
struct Ref {
  void* p = nullptr;
  bool bf = false;
};

// The activation a GELU or gated kernel computes: tanh-approximated GELU, exact (erf) GELU, or
// SiLU (x * sigmoid(x)) for SwiGLU.
enum class Act : int { kGeluTanh, kGeluErf, kSilu };

struct AdamConsts {
  float decay, w1, b2, w2, eps, bc2_sqrt, step_size;
  bool apply_decay;
  bool zero_moments;  // m and v are zeros: not read, only written
};

// Kernels over elements [b, e) of flat tensors, or over one row. A `Ref` with p == nullptr is
// absent. `acc`: add to what dst holds (dst + v, rounded once) instead of storing v.
struct Kernels {
  const char* name;  // Highway's target name, e.g. "AVX2", "AVX3" (AVX-512); ONE_LANE
  std::int64_t target;
  // dst[i] = src[i], or dst[i] + src[i] when acc.
  void (*copy)(Ref src, Ref dst, std::int64_t b, std::int64_t e, bool acc);
  // dst[i] (+)= x[i] * f(i), f(i) = mask ? (mask[i] ? s : 0) : s.
  void (*scale_mask)(Ref x, const std::uint8_t* mask, float s, Ref dst, std::int64_t b,
                     std::int64_t e, bool acc);
  // out[i] = res[i] + x[i] * f(i).
  void (*residual_fwd)(Ref res, Ref x, const std::uint8_t* mask, float s, Ref out,
                       std::int64_t b, std::int64_t e);
  // dx[i] (+)= dout[i] * f(i); dres[i] (+)= dout[i]; dout may alias dres or dx.
  void (*residual_bwd)(Ref dout, const std::uint8_t* mask, float s, Ref dres, Ref dx,
                       std::int64_t b, std::int64_t e, bool acc_res, bool acc_x);
  // AdamW over [b, e): master (fp32 parameters, or the fp32 master), m, v updated; params, when
  // present, receive the rounded master.
  void (*adamw)(Ref grads, float* master, float* m, float* v, Ref params, std::int64_t b,
                std::int64_t e, const AdamConsts& c);
  // LayerNorm of one row at x + base (H wide): y = (x - mean) * rstd * w (+ bias).
  void (*ln_fwd_row)(Ref x, Ref w, Ref bias, Ref y, std::int64_t base, int H, float eps);
  // Its input gradient; the row's mean and rstd into stats[0], stats[1].
  void (*ln_bwd_row)(Ref x, Ref w, Ref dy, Ref dx, std::int64_t base, int H, float eps, bool acc,
                     float* stats);
  // RMSNorm of one row with the weight (off + w).
  void (*rms_fwd_row)(Ref x, Ref w, Ref y, std::int64_t base, int H, float eps, float off);
  // Its input gradient; 0 and rstd into stats[0], stats[1].
  void (*rms_bwd_row)(Ref x, Ref w, Ref dy, Ref dx, std::int64_t base, int H, float eps, bool acc,
                      float off, float* stats);
  // Column sums of a norm's parameter gradients over rows in order, columns [c0, c0 + nc):
  // aw[c] += dy * (x - mean) * rstd, ab[c] += dy (ab may be null); row r starts at r * ld + off.
  void (*norm_param_cols)(Ref x, Ref dy, const float* stats, std::int64_t rows, std::int64_t ld,
                          std::int64_t off, int c0, int nc, float* aw, float* ab);
  // GELU (kGeluTanh or kGeluErf) over [b, e): out[i] = gelu(x[i]) without dy (dy.p == nullptr),
  // else out[i] (+)= dy[i] * gelu'(x[i]).
  // kGeluErf with bf16 x looks the value and slope up in a table of every bf16 input that the
  // set computes once with the same code: the same bits as computing them.
  void (*gelu)(Act kind, Ref x, Ref dy, Ref out, std::int64_t b, std::int64_t e, bool acc);
  // A gated activation (kSilu: SwiGLU, kGeluTanh: GeGLU) over rows [r0, r1) of gu [rows, 2F]
  // (gate | up). Without dy: out [rows, F] = act(gate) * up; else out [rows, 2F] (+)=
  // [dy * up * act'(gate) | dy * act(gate)].
  void (*glu)(Act kind, Ref gu, Ref dy, Ref out, std::int64_t r0, std::int64_t r1, int F,
              bool acc);
  // RoPE of one head at col: pairs (i, i + half), i < half, rotated by cos cs[i] and sin
  // sign * sn[i] (sign -1: the transpose, for the gradient); out may be in.
  void (*rope_head)(Ref in, Ref out, std::int64_t col, const float* cs, const float* sn, int half,
                    float sign, bool acc);
  // max over s[0, n).
  float (*row_max)(const float* s, int n);
  // s[k] = exp(s[k] - m); returns their sum (16 partial sums). With bits: s[k] is then
  // (bits[k] >= thr ? s[k] * keep : 0), the sum still of the values before dropout.
  float (*exp_sum)(float* s, int n, float m, const std::uint32_t* bits, std::uint32_t thr,
                   float keep);
  // sum over k < n of exp(s[k] * a - m) (16 partial sums); s unchanged.
  float (*scaled_exp_sum)(const float* s, int n, float a, float m);
  // A cross-entropy row's gradient: g[k] = (e[k] * inv - (k == target)) * scale. cap == 0: s[k]
  // holds e[k] (exp_sum's output); cap > 0: s[k] holds t = tanh(logit / cap), e[k] = exp(t * cap
  // - m), and g[k] is further multiplied by 1 - t^2. s becomes g.
  void (*xent_grad)(float* s, int n, int target, float inv, float scale, float cap, float m);
  // out[at + k] = s[k] / sum for k < n.
  void (*div_store)(const float* s, int n, float sum, Ref out, std::int64_t at);
  // sum over k < n of a[at + k] * b[at + k] (16 partial sums).
  float (*dot_refs)(Ref a, Ref b, std::int64_t at, int n);
  // Dropout keep flags: out[k] = (Philox bits of element first + k >= thr) for k < n, the bits of
  // core/util/philox.h for counter words 2 and 3 c2, c3 and key seed (cpu_simd_philox.cpp).
  void (*dropout_keep)(std::uint64_t first, std::int64_t n, std::uint32_t c2, std::uint32_t c3,
                       std::uint64_t seed, std::uint32_t thr, std::uint8_t* out);
};

// The active kernel set, or nullptr for the scalar reference (REMAT_SIMD=scalar). Throws
// remat::Error for a REMAT_SIMD that names no usable target.
const Kernels* active();
// The active set's name, or "scalar".
std::string active_name();
// Every set compiled in that this CPU runs, best first.
std::vector<const Kernels*> available();
// Replaces the active set (nullptr: the scalar reference); for tests and benchmarks.
void set_active(const Kernels* k);
// The set REMAT_SIMD-style `spec` names on this CPU (nullptr for "scalar"); throws for others.
const Kernels* by_name(const std::string& spec);

}  // namespace remat::cpu::simd
