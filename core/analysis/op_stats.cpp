#include "core/analysis/op_stats.h"

#include <algorithm>
#include <unordered_map>

#include "core/trace/csv.h"

namespace remat {

std::vector<OpStat> op_stats(const Trace& t, OpStatKey key, const OpStatsFilter& f) {
  std::unordered_map<std::string, std::size_t> at;
  std::vector<OpStat> out;
  for (const OpRecord& o : t.ops) {
    if (f.compute_only && o.stream != Stream::Compute) continue;
    if (o.end_ns < f.t0 || o.start_ns > f.t1) continue;
    const std::string& k = key == OpStatKey::OpType ? o.op : o.name;
    auto [it, fresh] = at.try_emplace(k, out.size());
    if (fresh) out.push_back({k});
    OpStat& s = out[it->second];
    const std::int64_t d = std::max<std::int64_t>(0, o.end_ns - o.start_ns);
    ++s.count;
    s.total_ns += d;
    s.min_ns = std::min(s.min_ns, d);
    s.max_ns = std::max(s.max_ns, d);
    s.flops += o.flops;
    s.bytes += o.bytes;
  }
  std::sort(out.begin(), out.end(), [](const OpStat& a, const OpStat& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.key < b.key;
  });
  return out;
}

std::int64_t step_length_ns(const Trace& t) {
  if (t.step_end_ns > t.step_start_ns) return t.step_end_ns - t.step_start_ns;
  if (t.ops.empty()) return 0;
  std::int64_t lo = t.ops.front().start_ns, hi = t.ops.front().end_ns;
  for (const OpRecord& o : t.ops) {
    lo = std::min(lo, o.start_ns);
    hi = std::max(hi, o.end_ns);
  }
  return hi - lo;
}

void write_op_stats_csv(const std::string& path, const std::vector<OpStat>& stats, std::int64_t step_ns) {
  csv::Writer w(path, {"key", "count", "total_us", "mean_us", "min_us", "max_us", "share_of_step", "flops", "bytes"});
  for (const OpStat& s : stats) {
    w.str(s.key).u64(s.count).f64(static_cast<double>(s.total_ns) / 1e3).f64(s.mean_ns() / 1e3);
    w.f64(static_cast<double>(s.count ? s.min_ns : 0) / 1e3).f64(static_cast<double>(s.max_ns) / 1e3);
    w.f64(step_ns > 0 ? static_cast<double>(s.total_ns) / static_cast<double>(step_ns) : 0.0);
    w.u64(s.flops).u64(s.bytes);
    w.end_row();
  }
  w.commit();
}

}  // namespace remat
