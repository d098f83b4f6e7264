// Prints how many CUDA devices this machine has (0 when none, or when the CUDA runtime cannot
// reach a driver), and on stderr why there are none. ctest runs it before the GPU tests
// (gpu_tests_need_a_device.cmake): without a device they are not started, only listed as skipped.
#include <cstdio>

#include "core/backend/cuda/cuda_entry.h"

int main() {
  char why[1024] = {0};
  const int n = remat_cuda_device_count(why, sizeof why);
  std::printf("%d\n", n < 0 ? 0 : n);
  if (n <= 0) std::fprintf(stderr, "%s\n", why[0] ? why : "no CUDA device");
  return 0;
}
