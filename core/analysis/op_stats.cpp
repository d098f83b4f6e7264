#include "core/analysis/op_stats.h"

#include <algorithm>
#include <unordered_map>

#include "core/analysis/block_names.h"
#include "core/trace/csv.h"

namespace remat {

namespace {

void add_op(OpStat& s, const OpRecord& o) {
  const std::int64_t d = std::max<std::int64_t>(0, o.end_ns - o.start_ns);
  const std::size_t p = static_cast<std::size_t>(o.phase);
  ++s.count;
  s.total_ns += d;
  s.min_ns = std::min(s.min_ns, d);
  s.max_ns = std::max(s.max_ns, d);
  s.flops += o.flops;
  s.bytes += o.bytes;
  if (p < static_cast<std::size_t>(kNumPhases)) {
    s.phase_ns[p] += d;
    ++s.phase_count[p];
    s.phase_flops[p] += o.flops;
  }
}

}  // namespace

std::vector<OpStat> op_stats(const Trace& t, OpStatKey key, const OpStatsFilter& f) {
  std::unordered_map<std::string, std::size_t> at;
  std::unordered_map<std::int32_t, std::size_t> at_block;
  std::vector<OpStat> out;
  std::vector<std::int32_t> blocks;  // of out's rows, by block
  const int first = key == OpStatKey::Block ? first_block(t) : 0;  // a pipeline stage's blocks as the model numbers them
  for (const OpRecord& o : t.ops) {
    if (f.compute_only && o.stream != Stream::Compute) continue;
    if (o.end_ns < f.t0 || o.start_ns > f.t1) continue;
    std::size_t row = 0;
    if (key == OpStatKey::Block) {
      const std::int32_t b = std::max<std::int32_t>(o.block, -1);
      auto [it, fresh] = at_block.try_emplace(b, out.size());
      if (fresh) {
        out.push_back({b >= 0 ? block_name(first, b) : std::string(kOutsideBlocks)});
        blocks.push_back(b);
      }
      row = it->second;
    } else {
      const std::string& k = key == OpStatKey::OpType ? o.op : o.name;
      auto [it, fresh] = at.try_emplace(k, out.size());
      if (fresh) out.push_back({k});
      row = it->second;
    }
    add_op(out[row], o);
  }
  if (key == OpStatKey::Block) {
    std::vector<std::size_t> order(out.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    // Blocks in order, the ops outside them last.
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const auto ka = static_cast<std::uint32_t>(blocks[a]), kb = static_cast<std::uint32_t>(blocks[b]);
      return ka < kb;
    });
    std::vector<OpStat> sorted;
    sorted.reserve(out.size());
    for (std::size_t i : order) sorted.push_back(std::move(out[i]));
    return sorted;
  }
  std::sort(out.begin(), out.end(), [](const OpStat& a, const OpStat& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.key < b.key;
  });
  return out;
}

OpStat op_stats_total(const std::vector<OpStat>& stats) {
  OpStat s{"total"};
  for (const OpStat& x : stats) {
    s.count += x.count;
    s.total_ns += x.total_ns;
    if (x.count) s.min_ns = std::min(s.min_ns, x.min_ns);
    s.max_ns = std::max(s.max_ns, x.max_ns);
    s.flops += x.flops;
    s.bytes += x.bytes;
    for (std::size_t p = 0; p < s.phase_ns.size(); ++p) {
      s.phase_ns[p] += x.phase_ns[p];
      s.phase_count[p] += x.phase_count[p];
      s.phase_flops[p] += x.phase_flops[p];
    }
  }
  return s;
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
  csv::Writer w(path, {"key", "count", "total_us", "forward_us", "recompute_us", "backward_us", "optimizer_us",
                       "mean_us", "min_us", "max_us", "share_of_step", "recompute_share_of_step", "flops",
                       "recompute_flops", "bytes"});
  auto share = [step_ns](std::int64_t ns) {
    return step_ns > 0 ? static_cast<double>(ns) / static_cast<double>(step_ns) : 0.0;
  };
  for (const OpStat& s : stats) {
    w.str(s.key).u64(s.count).f64(static_cast<double>(s.total_ns) / 1e3);
    for (Phase p : kStatPhases) w.f64(static_cast<double>(s.in(p)) / 1e3);
    w.f64(s.mean_ns() / 1e3);
    w.f64(static_cast<double>(s.count ? s.min_ns : 0) / 1e3).f64(static_cast<double>(s.max_ns) / 1e3);
    w.f64(share(s.total_ns)).f64(share(s.recompute_ns()));
    w.u64(s.flops).u64(s.phase_flops[static_cast<std::size_t>(Phase::Recompute)]).u64(s.bytes);
    w.end_row();
  }
  w.commit();
}

}  // namespace remat
