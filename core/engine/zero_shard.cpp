#include "core/engine/zero_shard.h"

#include <algorithm>
#include <string>

#include "core/util/error.h"

namespace remat {

std::int64_t ZeroShard::begin(int r) const { return std::min(total, shard() * r); }

std::int64_t ZeroShard::count(int r) const {
  return std::min(total, shard() * (r + 1)) - begin(r);
}

ZeroShard make_zero_shard(int stage, int ranks, int rank, std::int64_t total) {
  if (stage < 0 || stage > 3) throw ConfigError("zero", "must be 0, 1, 2 or 3, got " + std::to_string(stage));
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw ConfigError("zero", "rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
                                  " data-parallel ranks");
  if (total < 0) throw ConfigError("zero", "a model of " + std::to_string(total) + " parameters");
  ZeroShard z;
  z.stage = stage;
  z.ranks = ranks;
  z.rank = rank;
  z.total = total;
  return z;
}

ZeroBucket::ZeroBucket(std::vector<std::pair<std::int64_t, std::int64_t>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  for (const auto& r : ranges) {
    if (r.second <= 0) continue;
    if (!ranges_.empty() && ranges_.back().first + ranges_.back().second > r.first)
      throw Error("internal: overlapping parameter ranges in a ZeRO bucket");
    if (!ranges_.empty() && ranges_.back().first + ranges_.back().second == r.first)
      ranges_.back().second += r.second;
    else
      ranges_.push_back(r);
    numel_ += r.second;
  }
}

std::int64_t ZeroBucket::position(std::int64_t offset, std::int64_t n) const {
  std::int64_t pos = 0;
  for (const auto& r : ranges_) {
    if (offset >= r.first && offset + n <= r.first + r.second) return pos + (offset - r.first);
    pos += r.second;
  }
  return -1;
}

std::vector<std::size_t> ZeroBucket::counts(const ZeroShard& z) const {
  std::vector<std::size_t> c(static_cast<std::size_t>(z.ranks), 0);
  for (int k = 0; k < z.ranks; ++k) {
    const std::int64_t lo = z.begin(k), hi = lo + z.count(k);
    for (const auto& r : ranges_) {
      const std::int64_t a = std::max(lo, r.first), b = std::min(hi, r.first + r.second);
      if (b > a) c[static_cast<std::size_t>(k)] += static_cast<std::size_t>(b - a);
    }
  }
  return c;
}

std::vector<ZeroPiece> ZeroBucket::pieces(const ZeroShard& z) const {
  std::vector<ZeroPiece> out;
  const std::int64_t lo = z.begin(), hi = lo + z.count();
  std::int64_t pos = 0;
  for (const auto& r : ranges_) {
    const std::int64_t a = std::max(lo, r.first), b = std::min(hi, r.first + r.second);
    if (b > a) out.push_back({pos + (a - r.first), a - lo, b - a});
    pos += r.second;
  }
  return out;
}

ZeroBucket zero_block_bucket(const ParamLayout& L, int block) {
  std::vector<std::pair<std::int64_t, std::int64_t>> r;
  for (const ParamSpec& p : L.params())
    if (p.block == block) r.emplace_back(p.offset, p.numel());
  return ZeroBucket(std::move(r));
}

ZeroBucket zero_outer_bucket(const ParamLayout& L) {
  std::vector<std::pair<std::int64_t, std::int64_t>> r;
  for (const ParamSpec& p : L.params())
    if (p.block < 0) r.emplace_back(p.offset, p.numel());
  return ZeroBucket(std::move(r));
}

}  // namespace remat
