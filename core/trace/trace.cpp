#include "core/trace/trace.h"

#include <algorithm>

namespace remat {

const char* to_string(Stream s) {
  static const char* n[] = {"compute", "copy_d2h", "copy_h2d", "host"};
  return n[static_cast<int>(s)];
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<double> Trace::losses() const {
  std::vector<double> l;
  for (const auto& s : step_stats)
    if (s.counted) l.push_back(s.loss);
  return l;
}

std::vector<double> Trace::step_times_ms() const {
  std::vector<double> l;
  for (const auto& s : step_stats)
    if (s.counted) l.push_back(s.time_ms);
  return l;
}

double Trace::median_step_ms() const { return median(step_times_ms()); }

}  // namespace remat
