#include "core/trace/trace.h"

#include <algorithm>
#include <charconv>

namespace remat {

const char* to_string(Stream s) {
  static const char* n[] = {"compute", "copy_d2h", "copy_h2d", "host", "comm"};
  return n[static_cast<int>(s)];
}

std::string ranks_text(const std::vector<std::int32_t>& ranks) {
  std::string s;
  for (auto r : ranks) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}

bool parse_ranks(std::string_view s, std::vector<std::int32_t>& out, std::string& why) {
  constexpr std::int32_t kMaxRank = (1 << 20) - 1;
  out.clear();
  std::size_t i = 0;
  while (i < s.size()) {
    if (i > 0) {
      if (s[i] != ' ') break;
      ++i;
    }
    std::int32_t v = 0;
    const auto [p, ec] = std::from_chars(s.data() + i, s.data() + s.size(), v);
    const std::size_t n = static_cast<std::size_t>(p - (s.data() + i));
    if (ec != std::errc() || n == 0 || s[i] == '-' || s[i] == '+') {
      why = "expected ranks like '0 1' (decimal, one space apart)";
      return false;
    }
    if (v > kMaxRank) {
      why = "rank " + std::to_string(v) + " is more than " + std::to_string(kMaxRank);
      return false;
    }
    if (!out.empty() && v <= out.back()) {
      why = "ranks must be ascending, got " + std::to_string(v) + " after " + std::to_string(out.back());
      return false;
    }
    out.push_back(v);
    i += n;
  }
  if (i != s.size()) {
    why = "expected ranks like '0 1' (decimal, one space apart)";
    out.clear();
    return false;
  }
  return true;
}

int provenance_int(const Trace& t, const char* key, int fallback) {
  for (const auto& [k, v] : t.provenance)
    if (k == key) {
      int x = 0;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (ec == std::errc() && p == v.data() + v.size() && x >= 0) return x;
    }
  return fallback;
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
