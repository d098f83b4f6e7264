#include "core/util/process_time.h"

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

namespace remat {

double ms_since_process_start() {
#ifdef __linux__
  std::ifstream f("/proc/self/stat");
  std::string line;
  if (!std::getline(f, line)) return -1.0;
  // The command name (field 2) is in parentheses and may hold spaces: count from its end.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return -1.0;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  unsigned long long start_ticks = 0;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) start_ticks = std::strtoull(field.c_str(), nullptr, 10);  // starttime: ticks after boot
  const long hz = ::sysconf(_SC_CLK_TCK);
  timespec now{};
  if (start_ticks == 0 || hz <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &now) != 0) return -1.0;
  const double now_ms = static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
  return now_ms - static_cast<double>(start_ticks) * 1e3 / static_cast<double>(hz);
#else
  return -1.0;
#endif
}

}  // namespace remat
