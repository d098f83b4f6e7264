// tanh over rows of floats with SLEEF's SIMD tanh (1-ulp), eight lanes at a time where the CPU
// has AVX2 (cpu_tanh_avx.cpp), else four: the soft-caps' cap * tanh(x / cap) and their slopes,
// and the tanh GELU, take one call per row (or chunk) instead of one libm call a value. Results
// are deterministic for one CPU; SLEEF's four- and eight-lane functions may differ in the last bit.
#include <sleef.h>

#include <cmath>

#include "core/backend/cpu/cpu_common.h"
#include "core/util/gelu.h"

namespace remat::cpu {

#if defined(__x86_64__)
std::int64_t tanh_of_quotient_avx(float* x, std::int64_t n, float cap);  // cpu_tanh_avx.cpp
namespace {
bool has_avx2() {
  static const bool yes = [] {
    __builtin_cpu_init();  // not yet run when called from another library's static initializer
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return yes;
}
}  // namespace
#endif

void tanh_of_quotient(float* x, std::int64_t n, float cap) {
  std::int64_t k = 0;
#if defined(__x86_64__)
  if (has_avx2()) k = tanh_of_quotient_avx(x, n, cap);
#endif
#ifdef __SSE2__
  const __m128 c = _mm_set1_ps(cap);
  for (; k + 4 <= n; k += 4)
    _mm_storeu_ps(x + k, Sleef_tanhf4_u10(_mm_div_ps(_mm_loadu_ps(x + k), c)));
  if (k < n) {  // the tail in one padded vector
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (std::int64_t i = k; i < n; ++i) t[i - k] = x[i];
    _mm_storeu_ps(t, Sleef_tanhf4_u10(_mm_div_ps(_mm_loadu_ps(t), c)));
    for (std::int64_t i = k; i < n; ++i) x[i] = t[i - k];
  }
#else
  for (; k < n; ++k) x[k] = Sleef_tanhf_u10(x[k] / cap);
#endif
}

void gelu_tanh_t(FV x, std::int64_t start, int n, float* t) {
  for (int k = 0; k < n; ++k) t[k] = gelu_tanh_arg(x[start + k]);
  tanh_of_quotient(t, n, 1.0f);  // x / 1 is x
}

}  // namespace remat::cpu
