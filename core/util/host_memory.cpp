#include "core/util/host_memory.h"

#include <fstream>
#include <string>

namespace remat {

std::uint64_t host_memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kb = 0;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

}  // namespace remat
