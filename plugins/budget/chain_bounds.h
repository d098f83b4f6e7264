// Bounds on the cost of a chain's cheapest choice within a budget (chain.h), which let the
// dynamic program (budget_dp.h) skip states that cannot lead to it: a cost some fitting choice
// reaches (above the optimum or at it), and per state a cost the blocks after it cannot go below.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "plugins/budget/chain.h"

namespace remat::budget::detail {

// A cost the optimum does not exceed, from choices that fit: per block the option of least
// cost + lambda x kept bytes (ties: the lower peak), for lambdas spread over the options' own
// ratios, and mixes of two of those (the fewest blocks of the one keeping less, first or last,
// that fit); infinity when none fits.
inline double greedy_bound(const Chain& c, std::uint64_t budget) {
  double lo = std::numeric_limits<double>::max(), hi = 0.0;
  auto same = [](const ChainBlock& a, const ChainBlock& b) {
    return std::equal(a.opt.begin(), a.opt.end(), b.opt.begin(), b.opt.end(), [](const OptionCost& x, const OptionCost& y) {
      return x.allowed == y.allowed && x.kept == y.kept && x.cost == y.cost;
    });
  };
  for (std::size_t b = 0; b < c.blocks.size(); ++b) {
    const ChainBlock& blk = c.blocks[b];
    // A block with the options of the one before it (blocks of one table) adds no ratio.
    if (b > 0 && same(blk, c.blocks[b - 1])) continue;
    for (const OptionCost& x : blk.opt)
      for (const OptionCost& y : blk.opt)
        if (x.kept > y.kept && x.cost < y.cost) {
          const double r = (y.cost - x.cost) / static_cast<double>(x.kept - y.kept);
          lo = std::min(lo, r);
          hi = std::max(hi, r);
        }
  }
  const std::size_t L = c.blocks.size();
  std::vector<std::vector<int>> picks;
  const int steps = 24;
  for (int k = -1; k <= steps; ++k) {
    // k = -1: lambda 0 (the cheapest options); k = steps: above every ratio (the fewest bytes).
    const double lambda = k < 0 ? 0.0 : hi <= 0.0 ? 1.0 : lo * std::pow(hi / lo * 4.0, static_cast<double>(k) / steps) / 2.0;
    std::vector<int> choice(L, -1);
    for (std::size_t b = 0; b < L; ++b) {
      double score = 0.0;
      for (std::size_t o = 0; o < c.blocks[b].opt.size(); ++o) {
        const OptionCost& x = c.blocks[b].opt[o];
        if (!x.allowed) continue;
        const double v = x.cost + lambda * static_cast<double>(x.kept);
        const int p = choice[b];
        if (p < 0 || v < score || (v == score && x.peak() < c.blocks[b].opt[static_cast<std::size_t>(p)].peak())) {
          choice[b] = static_cast<int>(o);
          score = v;
        }
      }
      if (choice[b] < 0) return std::numeric_limits<double>::infinity();
    }
    if (picks.empty() || picks.back() != choice) picks.push_back(std::move(choice));
  }
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> mix(L);
  for (std::size_t i = 0; i < picks.size(); ++i)
    for (std::size_t j = i + 1; j < picks.size(); ++j)
      for (bool first : {true, false}) {
        // picks[j] keeps less than picks[i] (a larger lambda); n of its blocks, the others from picks[i].
        auto fill = [&](std::size_t n) {
          for (std::size_t b = 0; b < L; ++b) mix[b] = (first ? b < n : b >= L - n) ? picks[j][b] : picks[i][b];
          return chain_peak(c, mix) <= budget;
        };
        std::size_t a = 0, z = L;
        if (!fill(z)) continue;
        while (a < z) {
          const std::size_t m = (a + z) / 2;
          if (fill(m)) z = m;
          else a = m + 1;
        }
        fill(z);
        best = std::min(best, chain_cost(c, mix));
      }
  for (const auto& p : picks)
    if (chain_peak(c, p) <= budget) best = std::min(best, chain_cost(c, p));
  return best;
}

// For each block b but the last, a cost the blocks after it cannot go below once the blocks up
// to b keep `kept` bytes: the last block's least cost plus the least cost of the blocks between
// with each block's options relaxed to their lower convex hull of (kept, cost), under the one
// constraint the last block's peak puts on what they keep together (every other constraint
// dropped, so it never exceeds the true least cost).
class RestBound {
 public:
  RestBound(const Chain& c, std::uint64_t cap) : cap_(cap) {
    const std::size_t L = c.blocks.size();
    rest_.resize(L);
    if (L < 2) return;
    for (const OptionCost& o : c.blocks[L - 1].opt)
      if (o.allowed && o.peak() <= cap) {
        last_cost_ = std::min(last_cost_, o.cost);
        last_peak_ = std::min(last_peak_, o.peak());
      }
    // rest_[b]: the blocks b + 1 .. L - 2.
    for (std::size_t b = L - 2; b-- > 0;) {
      const Suffix& after = rest_[b + 1];
      Suffix here;
      const Hull h = hull(c.blocks[b + 1], cap);
      if (!h.ok) {
        rest_[b].ok = false;
        for (std::size_t k = b; k-- > 0;) rest_[k].ok = false;
        break;
      }
      here.ok = after.ok;
      here.kept = after.kept + h.kept;
      here.cost = after.cost + h.cost;
      // Merge the slopes (cost per byte given up), the same slope's segments combined.
      std::size_t i = 0, j = 0;
      while (i < after.seg.size() || j < h.seg.size()) {
        Seg s;
        if (j == h.seg.size() || (i < after.seg.size() && after.seg[i].slope <= h.seg[j].slope)) s = after.seg[i++];
        else s = h.seg[j++];
        if (!here.seg.empty() && here.seg.back().slope == s.slope) {
          here.seg.back().bytes += s.bytes;
          here.seg.back().cost += s.cost;
        } else {
          here.seg.push_back(s);
        }
      }
      for (std::size_t k = 1; k < here.seg.size(); ++k) {
        here.seg[k].bytes_before = here.seg[k - 1].bytes_before + here.seg[k - 1].bytes;
        here.seg[k].cost_before = here.seg[k - 1].cost_before + here.seg[k - 1].cost;
      }
      rest_[b] = std::move(here);
    }
  }

  // The bound after block b (b < the last), its blocks up to b keeping `kept` bytes.
  double at(std::size_t b, std::uint64_t kept) const {
    std::size_t hint = kNoHint;
    return at(b, kept, &hint);
  }
  // The same, for calls at one b with `kept` never falling: *hint (kNoHint at first) keeps the
  // segment found last, from which the next is walked to instead of searched for.
  static constexpr std::size_t kNoHint = std::numeric_limits<std::size_t>::max();
  double at(std::size_t b, std::uint64_t kept, std::size_t* hint) const {
    const Suffix& r = rest_[b];
    const double inf = std::numeric_limits<double>::infinity();
    if (!r.ok || last_peak_ == kNone || kept + last_peak_ > cap_) return inf;
    const std::uint64_t room = cap_ - kept - last_peak_;
    if (r.kept <= room) return last_cost_ + r.cost;
    const std::uint64_t give = r.kept - room;  // bytes the blocks between must give up
    // The first segment reaching `give`; as kept bytes rise, so do give and it.
    std::size_t i = *hint;
    if (i == kNoHint || i >= r.seg.size() || give < r.seg[i].bytes_before) {
      i = static_cast<std::size_t>(std::upper_bound(r.seg.begin(), r.seg.end(), give,
                                                    [](std::uint64_t g, const Seg& s) { return g <= s.bytes_before + s.bytes; }) -
                                   r.seg.begin());
    } else {
      while (i < r.seg.size() && give > r.seg[i].bytes_before + r.seg[i].bytes) ++i;
    }
    *hint = i;
    if (i == r.seg.size()) return inf;
    const Seg& s = r.seg[i];
    return last_cost_ + r.cost + s.cost_before + static_cast<double>(give - s.bytes_before) * s.slope;
  }

 private:
  static constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();
  struct Seg {
    double slope = 0.0;
    std::uint64_t bytes = 0;  // given up along this slope
    double cost = 0.0;        // what it costs
    std::uint64_t bytes_before = 0;
    double cost_before = 0.0;
  };
  struct Suffix {
    bool ok = true;
    std::uint64_t kept = 0;  // with each block's cheapest option
    double cost = 0.0;
    std::vector<Seg> seg;    // by slope, ascending
  };
  struct Hull {
    bool ok = false;
    std::uint64_t kept = 0;
    double cost = 0.0;
    std::vector<Seg> seg;
  };
  // The lower convex hull of a block's options, from its cheapest (fewest bytes among equals)
  // toward fewer bytes.
  static Hull hull(const ChainBlock& blk, std::uint64_t cap) {
    std::vector<std::pair<std::uint64_t, double>> pts;
    for (const OptionCost& o : blk.opt)
      if (o.allowed && o.peak() <= cap) pts.push_back({o.kept, o.cost});
    Hull h;
    if (pts.empty()) return h;
    h.ok = true;
    std::sort(pts.begin(), pts.end());
    std::vector<std::pair<std::uint64_t, double>> low;  // lower hull, by kept bytes
    auto cross = [](const auto& o, const auto& a, const auto& b) {
      return (static_cast<double>(a.first) - static_cast<double>(o.first)) * (b.second - o.second) -
             (a.second - o.second) * (static_cast<double>(b.first) - static_cast<double>(o.first));
    };
    for (const auto& p : pts) {
      if (!low.empty() && low.back().first == p.first) continue;  // the cheaper of equal bytes came first
      while (low.size() >= 2 && cross(low[low.size() - 2], low.back(), p) <= 0) low.pop_back();
      low.push_back(p);
    }
    // From the cheapest point leftward: each segment gives up bytes at a rising cost per byte.
    std::size_t k = 0;
    for (std::size_t i = 1; i < low.size(); ++i)
      if (low[i].second < low[k].second) k = i;
    h.kept = low[k].first;
    h.cost = low[k].second;
    for (std::size_t i = k; i > 0; --i) {
      Seg s;
      s.bytes = low[i].first - low[i - 1].first;
      s.cost = low[i - 1].second - low[i].second;
      s.slope = s.cost / static_cast<double>(s.bytes);
      h.seg.push_back(s);
    }
    return h;
  }

  std::uint64_t cap_;
  double last_cost_ = std::numeric_limits<double>::infinity();
  std::uint64_t last_peak_ = kNone;
  std::vector<Suffix> rest_;
};

}  // namespace remat::budget::detail
