// The eight-lane twin of tanh_of_quotient (cpu_tanh.cpp), compiled with -mavx2 -mfma and called
// only where the CPU has AVX2. It includes no project header, so that no inline function of ours
// is compiled here with instructions another CPU may lack.
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

namespace remat::cpu {

std::int64_t tanh_of_quotient_avx(float* x, std::int64_t n, float cap) {
  const __m256 c = _mm256_set1_ps(cap);
  std::int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    _mm256_storeu_ps(x + k, Sleef_tanhf8_u10(_mm256_div_ps(_mm256_loadu_ps(x + k), c)));
  return k;  // the caller takes the tail
}

}  // namespace remat::cpu
