#include "views/run_view_data.h"

#include <algorithm>
#include <cmath>

namespace remat::gui {

MemoryViewData memory_view_data(const Trace& tr) {
  MemoryViewData d;
  d.tl = memory_timeline(tr);
  d.phases = phase_spans(tr);
  d.live = LiveTensorIndex(tr);
  d.origin = d.tl.range.start_ns;
  d.duration = std::max<std::int64_t>(1, d.tl.range.end_ns - d.tl.range.start_ns);
  const std::size_t n = d.tl.points.size();
  d.x.resize(n);
  d.total.resize(n);
  d.host.resize(n);
  d.reserved.resize(n);
  std::array<bool, kNumCategories> any{};
  std::uint64_t reserved = 0;
  if (d.tl.range.first > 0 && d.tl.range.first <= tr.events.size()) reserved = tr.events[d.tl.range.first - 1].reserved;
  for (std::size_t i = 0; i < n; ++i) {
    const TimelinePoint& p = d.tl.points[i];
    d.x[i] = static_cast<double>(p.t_ns - d.origin);
    d.total[i] = static_cast<double>(p.device);
    d.host[i] = static_cast<double>(p.host);
    if (p.event >= 0 && static_cast<std::size_t>(p.event) < tr.events.size())
      reserved = tr.events[static_cast<std::size_t>(p.event)].reserved;
    d.reserved[i] = static_cast<double>(reserved);
    d.host_max = std::max(d.host_max, d.host[i]);
    d.reserved_max = std::max(d.reserved_max, d.reserved[i]);
    for (int c = 0; c < kNumCategories; ++c) any[c] = any[c] || p.live[c] != 0;
  }
  for (int c = 0; c < kNumCategories; ++c)
    if (any[c] && static_cast<Category>(c) != Category::HostOffloaded) d.stacked.push_back(static_cast<Category>(c));
  d.stack_all = stack_categories(d, all_categories());
  return d;
}

std::vector<std::vector<double>> stack_categories(const MemoryViewData& d, const CategorySet& shown) {
  const std::size_t n = d.tl.points.size();
  std::vector<std::vector<double>> cum(d.stacked.size(), std::vector<double>(n));
  for (std::size_t i = 0; i < n; ++i) {
    double s = 0;
    for (std::size_t k = 0; k < d.stacked.size(); ++k) {
      const int c = static_cast<int>(d.stacked[k]);
      if (shown[c]) s += static_cast<double>(d.tl.points[i].live[c]);
      cum[k][i] = s;
    }
  }
  return cum;
}

SliceViewData slice_view_data(const Trace& t) {
  SliceViewData d;
  d.tree = SliceTree(t);
  d.rows = d.tree.span_rows();
  for (const OpRecord& o : t.ops) d.phases[static_cast<int>(o.phase)] = true;
  return d;
}

std::uint64_t band_threshold(double bytes_per_pixel) {
  if (!(bytes_per_pixel > 1)) return 1;
  return std::uint64_t{1} << std::min(62, static_cast<int>(std::ceil(std::log2(bytes_per_pixel))));
}

std::shared_ptr<const RunViewData> prepare_run_view(std::shared_ptr<const Trace> t, const std::atomic<bool>& cancel) {
  auto check = [&cancel] {
    if (cancel.load(std::memory_order_relaxed)) throw LoadCancelled();
  };
  auto d = std::make_shared<RunViewData>();
  d->trace = std::move(t);
  if (!d->trace) return d;
  const Trace& tr = *d->trace;
  check();
  auto memory = std::make_shared<const MemoryViewData>(memory_view_data(tr));
  d->memory = memory;
  check();
  d->slices = std::make_shared<const SliceViewData>(slice_view_data(tr));
  check();
  d->stats = std::make_shared<const std::vector<OpStat>>(op_stats(tr, OpStatKey::OpType));
  check();
  auto bands = std::make_shared<const AllocBands>(tr);
  d->bands = bands;
  check();
  // Fitted to the whole device, as the view first shows it (MemoryTimelineView::dataValueMax).
  const double top = memory_value_max(*memory, tr);
  d->layout = std::make_shared<const AllocLayout>(
      layout_bands(*bands, all_categories(), band_threshold(top / kFirstLayoutHeight)));
  return d;
}

double memory_value_max(const MemoryViewData& d, const Trace& t) {
  const double m = std::max({static_cast<double>(d.tl.peak_device), d.host_max, d.reserved_max,
                             static_cast<double>(t.predicted_peak_bytes)});
  return m > 0 ? m * kValueHeadroom : 1024.0;
}

}  // namespace remat::gui
