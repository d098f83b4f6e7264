// What the run view draws of a trace, computed from it once and then only read: the memory
// timeline's series, the op timeline's slice levels and rows, the statistics of the step and the
// allocations' bands. Built without Qt, so a worker thread can build it while the window goes
// on (RunView); handed to the views as shared_ptr<const ...>, never changed after.
#pragma once
#include <array>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <vector>

#include "core/analysis/alloc_bands.h"
#include "core/analysis/downsample.h"
#include "core/analysis/live_tensors.h"
#include "core/analysis/memory_focus.h"
#include "core/analysis/memory_timeline.h"
#include "core/analysis/op_stats.h"
#include "core/analysis/phase_spans.h"
#include "core/analysis/slice_tree.h"
#include "core/trace/trace.h"

namespace remat::gui {

// The memory timeline's data (MemoryTimelineView): core's timeline, the phases, the live-tensor
// index, and the full-resolution series, x in ns since the range's start.
struct MemoryViewData {
  MemoryTimeline tl;
  std::vector<PhaseSpan> phases;
  LiveTensorIndex live;
  std::vector<double> x, total, host, reserved;
  std::vector<Category> stacked;  // the categories the run has, stacked bottom first
  // Per stacked category the top of the stack of every category up to it (all shown).
  std::vector<std::vector<double>> stack_all;
  double host_max = 0, reserved_max = 0;
  std::int64_t origin = 0, duration = 1;
};
MemoryViewData memory_view_data(const Trace& t);
// Per stacked category the top of the stack of the shown ones up to it (from 0; a hidden
// category's top is the one below it).
std::vector<std::vector<double>> stack_categories(const MemoryViewData& d, const CategorySet& shown);
// The top of the value axis that fits everything the timeline draws of the whole device.
double memory_value_max(const MemoryViewData& d, const Trace& t);

// The op timeline's slice levels and the rows it draws (OpTimelineView).
struct SliceViewData {
  SliceTree tree;
  SpanRows rows;
  std::array<bool, kNumPhases> phases{};  // the phases the ops have
};
SliceViewData slice_view_data(const Trace& t);

// Everything the run view shows of one trace.
struct RunViewData {
  std::shared_ptr<const Trace> trace;
  std::shared_ptr<const MemoryViewData> memory;
  std::shared_ptr<const SliceViewData> slices;
  std::shared_ptr<const std::vector<OpStat>> stats;  // of the whole step, by op type
  std::shared_ptr<const AllocBands> bands;
  std::shared_ptr<const AllocLayout> layout;  // of every category, at `layout_height` pixels
};

// Thrown by prepare_run_view when `cancel` was set.
struct LoadCancelled : std::runtime_error {
  LoadCancelled() : std::runtime_error("cancelled") {}
};

// The bands' first layout is made for a plot this many pixels high, fitted to the peak.
inline constexpr int kFirstLayoutHeight = 400;

// Builds every piece, checking `cancel` between them; any error of core propagates.
std::shared_ptr<const RunViewData> prepare_run_view(std::shared_ptr<const Trace> t, const std::atomic<bool>& cancel);

// The size threshold of the allocations' layout when `bytes_per_pixel` bytes fill a pixel: the
// next power of two (1 when a pixel holds at most one byte).
std::uint64_t band_threshold(double bytes_per_pixel);

}  // namespace remat::gui
