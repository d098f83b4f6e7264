// The libFuzzer entry of one target; REMAT_FUZZ_ENTRY names its function (fuzz/CMakeLists.txt).
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  remat::fuzz::REMAT_FUZZ_ENTRY(data, size);
  return 0;
}
