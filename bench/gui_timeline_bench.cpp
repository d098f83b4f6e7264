// The desktop app's timelines on a big trace, offscreen: a million ops (and a million memory
// events), drawn at screen resolution, then zoomed in and out step by step as a mouse wheel
// does. Reports the time to load the trace into the views, the first full draw, and each zoom
// step (range change, downsampling in core, replot), and for the op timeline's track view the
// pan steps too; --max-ms N fails when a draw, a zoom or a pan step of the op timeline or a draw
// or zoom step of the memory timeline takes longer. The memory timeline's allocations view (one
// band per allocation) is timed on the same trace: first draw, zoom, pan and byte-zoom steps as
// min / median / max, each frame held to --max-ms. The whole run view is loaded as the app does
// (its data built on a worker): the time until it is shown and the longest the GUI thread was
// blocked meanwhile (a 5 ms timer's longest gap). The op timeline is timed again with its tracks
// arranged (one pinned, one hidden); the Ranks page's lanes of four ranks (a quarter of the ops
// each, an all-reduce every 50 ops) with the arrows between their collectives; and the Diff page
// on two runs of a million ops and a tenth more.
//
//   build/bin/gui_timeline_bench [--ops N] [--max-ms N]
#include <QApplication>
#include <QElapsedTimer>
#include <QLabel>
#include <QScrollBar>
#include <QTableView>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <qcustomplot.h>

#include "views/alloc_bands_plottable.h"
#include "views/diff_view.h"
#include "views/flow_plottable.h"
#include "views/ranks_timeline_view.h"
#include "views/memory_timeline_view.h"
#include "core/analysis/slice_tree.h"
#include "views/op_timeline_view.h"
#include "views/run_view.h"
#include "views/run_view_data.h"
#include "views/schedule_strip.h"

using namespace remat;
using namespace remat::gui;

namespace {

// A step of `n` ops: forward over 24 blocks, backward with recomputation, the optimizer; a
// copy to and from the host every 50 ops; an allocation and a free around every op.
std::shared_ptr<const Trace> big_trace(int n) {
  auto t = std::make_shared<Trace>();
  t->model.layers = 24;
  t->model.name = "bench";
  t->policy = "uniform";
  t->device = "cpu";
  t->names = {"", "act", "tmp"};
  t->ops.reserve(static_cast<std::size_t>(n) * 21 / 20);
  t->events.reserve(static_cast<std::size_t>(n) * 2);
  std::int64_t now = 1000;
  std::uint64_t id = 1;
  const int per_block = n / (3 * 24) + 1;
  for (int i = 0; i < n; ++i) {
    OpRecord o;
    o.start_ns = now;
    o.end_ns = now + 40 + (i % 7) * 10;
    o.phase = i < n * 4 / 10 ? Phase::Forward : i < n * 6 / 10 ? Phase::Recompute : i < n * 98 / 100 ? Phase::Backward : Phase::Optimizer;
    o.block = (i / per_block) % 24;
    o.name = "op";
    o.op = "mlp.fc";
    o.flops = 1000;
    o.op_id = static_cast<std::uint64_t>(i);
    t->ops.push_back(o);
    if (i % 50 == 0) {
      OpRecord c = o;
      c.stream = i % 100 == 0 ? Stream::CopyToHost : Stream::CopyToDevice;
      c.end_ns = c.start_ns + 2000;
      t->ops.push_back(c);
    }
    MemoryEvent a;
    a.t_ns = now;
    a.delta = 4096 + (i % 13) * 512;
    a.id = id;
    a.category = o.phase == Phase::Forward ? Category::SavedActivations : Category::ActivationGrads;
    a.phase = o.phase;
    a.block = o.block;
    a.tensor = 1;
    a.step = 0;
    t->events.push_back(a);
    // Saved activations stay until the backward; everything else is freed after its op.
    if (o.phase != Phase::Forward) {
      MemoryEvent f = a;
      f.t_ns = o.end_ns;
      f.delta = -a.delta;
      t->events.push_back(f);
    }
    ++id;
    now = o.end_ns + 5;
  }
  t->step_start_ns = 1000;
  t->step_end_ns = now;
  t->step_first_event = 0;
  t->step_end_event = t->events.size();
  for (int b = 0; b < 24; ++b) {
    ScheduleRecord r;
    r.action = "forward";
    r.block = b;
    r.start_ns = 1000 + (now - 1000) * b / 60;
    r.end_ns = 1000 + (now - 1000) * (b + 1) / 60;
    t->schedule_records.push_back(r);
  }
  std::int64_t peak = 0, live = 0;
  for (const auto& e : t->events) peak = std::max(peak, live += e.delta);
  t->peak_bytes = static_cast<std::uint64_t>(peak);
  return t;
}

struct Stats {
  double max = 0, median = 0, mean = 0;
};

Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.max = v.back();
  s.median = v[v.size() / 2];
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return s;
}

double ms(const QElapsedTimer& t) { return static_cast<double>(t.nsecsElapsed()) / 1e6; }

// Zooms `plot` in by 0.6 per step around a point at 37 % of the range, then back out, replotting
// immediately after each step; returns the time of each step.
std::vector<double> zoom_steps(QCustomPlot* plot, int steps) {
  std::vector<double> times;
  for (int dir : {0, 1})
    for (int i = 0; i < steps; ++i) {
      QElapsedTimer t;
      t.start();
      QCPAxis* x = plot->xAxis;
      const double at = x->range().lower + x->range().size() * 0.37;
      x->scaleRange(dir == 0 ? 0.6 : 1 / 0.6, at);
      plot->replot(QCustomPlot::rpImmediateRefresh);
      times.push_back(ms(t));
    }
  return times;
}

// Min, median and max of step times; false when the max is over `max_ms` (0: no limit).
bool report_min_median_max(const char* what, std::vector<double> v, double max_ms) {
  if (v.empty()) return true;
  std::sort(v.begin(), v.end());
  const bool over = max_ms > 0 && v.back() > max_ms;
  std::printf("  %-44s min %6.2f  median %6.2f  max %6.2f ms (%zu steps)%s\n", what, v.front(), v[v.size() / 2],
              v.back(), v.size(), over ? "  OVER" : "");
  return !over;
}

// Pans `plot` by a tenth of its range per step, `steps` to the right then back, replotting
// immediately after each step; returns the time of each step.
std::vector<double> pan_steps(QCustomPlot* plot, int steps) {
  std::vector<double> times;
  for (int dir : {1, -1})
    for (int i = 0; i < steps; ++i) {
      QElapsedTimer t;
      t.start();
      plot->xAxis->moveRange(dir * plot->xAxis->range().size() * 0.1);
      plot->replot(QCustomPlot::rpImmediateRefresh);
      times.push_back(ms(t));
    }
  return times;
}

// The op timeline's track view (step, phase, block and op levels, copies on their own tracks):
// building the slice levels, the first draw, zoom steps and pan steps (a tenth of the view
// each way), each replotted at once. False when a draw or step is over `max_ms`.
bool op_track_view_bench(const std::shared_ptr<const Trace>& trace, double max_ms) {
  std::printf("op timeline, track view (1400 x 260):\n");
  OpTimelineView v;
  v.resize(1400, 260);
  v.show();
  QApplication::processEvents();
  QElapsedTimer t;
  t.start();
  const SliceTree tree(*trace);
  std::printf("  %-44s %8.2f ms (%zu tracks)\n", "slice levels alone (core, any thread)", ms(t), tree.tracks().size());
  t.restart();
  v.setTrace(trace, trace->step_start_ns, trace->step_end_ns - trace->step_start_ns);
  std::printf("  %-44s %8.2f ms\n", "load (slice levels and rows, GUI thread)", ms(t));
  bool ok = true;
  std::vector<double> first;
  for (int i = 0; i < 5; ++i) {
    v.plot()->xAxis->setRange(v.dataTimeRange());
    t.restart();
    v.plot()->replot(QCustomPlot::rpImmediateRefresh);
    first.push_back(ms(t));
  }
  std::printf("  %-44s %zu\n", "bars drawn for the whole step", v.drawnBars());
  ok = report_min_median_max("full draw (5 times)", first, max_ms) && ok;
  const auto zooms = zoom_steps(v.plot(), 20);
  ok = report_min_median_max("zoom step (x0.6 in, then out)", zooms, max_ms) && ok;
  // Pan at three zoom levels: the whole step / 50, / 2500, / 125000 (a few ops).
  std::vector<double> pans;
  QCPAxis* x = v.plot()->xAxis;
  for (double div : {50.0, 2500.0, 125000.0}) {
    const double size = v.dataTimeRange().size() / div;
    x->setRange(v.dataTimeRange().size() * 0.3, v.dataTimeRange().size() * 0.3 + size);
    v.plot()->replot(QCustomPlot::rpImmediateRefresh);
    for (int i = 0; i < 20; ++i) {
      t.restart();
      x->moveRange((i < 10 ? 0.1 : -0.1) * size);
      v.plot()->replot(QCustomPlot::rpImmediateRefresh);
      pans.push_back(ms(t));
    }
  }
  ok = report_min_median_max("pan step (a tenth of the view, 3 zooms)", pans, max_ms) && ok;
  // The same with the tracks arranged: the op level pinned on top, the step hidden.
  v.setTrackPinned(v.tree().leaf_track(Stream::Compute), true);
  v.setTrackHidden(0, true);
  v.resetZoom();
  ok = report_min_median_max("zoom step, op track pinned, step hidden", zoom_steps(v.plot(), 20), max_ms) && ok;
  x->setRange(v.dataTimeRange().size() * 0.3, v.dataTimeRange().size() * 0.3 + v.dataTimeRange().size() / 2500);
  ok = report_min_median_max("pan step, tracks arranged (1/2500 view)", pan_steps(v.plot(), 10), max_ms) && ok;
  return ok;
}

// Rank `rank` of a run of `ranks`: the big step of `n` ops, with an all-reduce of every rank
// every 50 ops on the comm stream, each rank arriving a little later than the one before.
std::shared_ptr<const Trace> rank_trace(int n, int rank, int ranks) {
  auto t = std::make_shared<Trace>(*big_trace(n));
  std::vector<std::int32_t> group(static_cast<std::size_t>(ranks));
  std::iota(group.begin(), group.end(), 0);
  const std::size_t compute = t->ops.size();
  for (std::size_t i = 0; i < compute; i += 50) {
    OpRecord c = t->ops[i];
    c.stream = Stream::Comm;
    c.name = "tp.allreduce";
    c.op = "all_reduce";
    c.ranks = group;
    c.start_ns += 30 * rank;
    c.end_ns = t->ops[i].start_ns + 30 * ranks + 400;
    c.bytes = 1 << 20;
    t->ops.push_back(c);
  }
  return t;
}

// The Ranks page's op lanes of four ranks with the arrows between their collectives: load,
// first draw, zoom and pan steps with every arrow that crosses the view drawn.
bool ranks_flows_bench(int n, double max_ms) {
  constexpr int kRanks = 4;
  std::printf("ranks page, %d ranks of %d ops with flows (1400 x 400):\n", kRanks, n);
  std::vector<std::shared_ptr<const Trace>> ranks;
  for (int r = 0; r < kRanks; ++r) ranks.push_back(rank_trace(n, r, kRanks));
  RanksTimelineView v;
  v.resize(1400, 400);
  v.show();
  QApplication::processEvents();
  QElapsedTimer t;
  t.start();
  v.setRanks(ranks);
  std::printf("  %-44s %8.2f ms (%zu flows)\n", "load (lanes and links, GUI thread)", ms(t), v.links().flows.size());
  bool ok = true;
  std::vector<double> first;
  for (int i = 0; i < 5; ++i) {
    t.restart();
    v.plot()->replot(QCustomPlot::rpImmediateRefresh);
    first.push_back(ms(t));
  }
  std::printf("  %-44s %zu in %zu lines\n", "flows drawn for the whole step", v.flows()->lastDrawn(), v.flows()->lastLines());
  ok = report_min_median_max("full draw (5 times)", first, max_ms) && ok;
  ok = report_min_median_max("zoom step (x0.6 in, then out)", zoom_steps(v.plot(), 20), max_ms) && ok;
  QCPAxis* x = v.plot()->xAxis;
  x->setRange(v.dataTimeRange().size() * 0.3, v.dataTimeRange().size() * 0.3 + v.dataTimeRange().size() / 500);
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  std::printf("  %-44s %zu in %zu lines\n", "flows drawn at 1/500 of the step", v.flows()->lastDrawn(), v.flows()->lastLines());
  ok = report_min_median_max("pan step (a tenth of 1/500 of the step)", pan_steps(v.plot(), 10), max_ms) && ok;
  return ok;
}

// The Diff page on two runs of `n` ops (the second with a tenth more, so it adds ops): the diff
// on its worker, then the lanes' first draw, zoom and pan steps, and the table's scrolling.
bool diff_bench(int n, double max_ms) {
  std::printf("diff page, %d against %d ops (1400 x 700):\n", n, n + n / 10);
  auto a = big_trace(n), b = big_trace(n + n / 10);
  std::vector<RunEntry> runs(2);
  runs[0].trace = a;
  runs[0].label = "A";
  runs[1].trace = b;
  runs[1].label = "B";
  DiffView v;
  v.resize(1400, 700);
  v.show();
  QApplication::processEvents();
  QElapsedTimer t;
  t.start();
  v.setRuns(runs, 1);
  while (v.busy()) QApplication::processEvents(QEventLoop::AllEvents | QEventLoop::WaitForMoreEvents, 5);
  std::printf("  %-44s %8.2f ms (%llu matched, %llu added, %llu removed)\n", "diff (worker) and the views filled", ms(t),
              static_cast<unsigned long long>(v.result() ? v.result()->matched : 0),
              static_cast<unsigned long long>(v.result() ? v.result()->added : 0),
              static_cast<unsigned long long>(v.result() ? v.result()->removed : 0));
  if (!v.result()) {
    std::printf("  no diff: %s\n", qPrintable(v.summary()->text()));
    return false;
  }
  bool ok = true;
  std::vector<double> first;
  for (int i = 0; i < 5; ++i) {
    t.restart();
    v.lanes()->plot()->replot(QCustomPlot::rpImmediateRefresh);
    first.push_back(ms(t));
  }
  ok = report_min_median_max("lanes: full draw (5 times)", first, max_ms) && ok;
  ok = report_min_median_max("lanes: zoom step (x0.6 in, then out)", zoom_steps(v.lanes()->plot(), 20), max_ms) && ok;
  std::vector<double> scroll;
  QScrollBar* bar = v.table()->verticalScrollBar();
  for (int i = 0; i < 20; ++i) {
    t.restart();
    bar->setValue(bar->maximum() * i / 19);
    v.table()->viewport()->repaint();
    scroll.push_back(ms(t));
  }
  ok = report_min_median_max("table: scroll and repaint (20 places)", scroll, max_ms) && ok;
  return ok;
}

// The memory timeline in its allocations view: building the bands and the first layout, the
// first full draw, time zoom steps, pan steps at a twentieth of the step, and byte zoom steps (a
// new level of detail each time the byte scale crosses a power of two).
bool bench_allocations(const std::shared_ptr<const Trace>& trace, double max_ms) {
  std::printf("memory timeline, allocations view (1400 x 500):\n");
  MemoryTimelineView v;
  v.resize(1400, 500);
  v.show();
  v.setTrace(trace, "bench");
  QApplication::processEvents();
  QElapsedTimer t;
  t.start();
  v.setMemoryMode(MemoryMode::Allocations);
  std::printf("  %-44s %8.2f ms\n", "switch (bands of every allocation, layout)", ms(t));
  bool ok = true;
  t.restart();
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  const double first = ms(t);
  const bool over = max_ms > 0 && first > max_ms;
  ok = ok && !over;
  std::printf("  %-44s %8.2f ms%s\n", "first full draw", first, over ? "  OVER" : "");
  const AllocBandsPlottable* p = v.allocations();
  std::printf("  %-44s %zu bands of %zu allocations, %zu drawn\n", "at the whole step", p->layout().size(),
              p->bands()->bands().size(), p->lastDrawn());
  ok = report_min_median_max("zoom step (x0.6 in, then out)", zoom_steps(v.plot(), 20), max_ms) && ok;
  v.plot()->xAxis->scaleRange(0.05, v.plot()->xAxis->range().lower);
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  ok = report_min_median_max("pan step (a tenth of 1/20 of the step)", pan_steps(v.plot(), 20), max_ms) && ok;
  v.resetZoom();
  // 25 steps of two wheel steps: down to 1/3400 of the byte range, where every allocation of
  // the trace is a band of its own, then back, a step every 16 ms as a wheel turns, the event
  // loop running in between. Every replot is a frame: the steps' own and those made when a
  // layout laid out on the worker is ready.
  std::vector<double> frames;
  QElapsedTimer frame;
  QObject::connect(v.plot(), &QCustomPlot::beforeReplot, [&frame] { frame.start(); });
  auto on_frame = QObject::connect(v.plot(), &QCustomPlot::afterReplot, [&] { frames.push_back(ms(frame)); });
  auto run_events = [](double for_ms) {
    QElapsedTimer w;
    w.start();
    while (ms(w) < for_ms) QApplication::processEvents(QEventLoop::AllEvents, 2);
  };
  int relayouts = 0;
  for (int dir : {1, -1})
    for (int i = 0; i < 25; ++i) {
      v.zoomValue(dir * 2.0, 0);
      relayouts += p->relayoutPending();
      run_events(16);
      if (dir == 1 && i == 24) {
        t.restart();
        while (p->relayoutPending()) run_events(1);
        run_events(1);
        std::printf("  %-44s %zu bands, %zu drawn, its layout drawn %.0f ms after the last step\n",
                    "zoomed in on the bytes x1/3400", p->layout().size(), p->lastDrawn(), ms(t));
      }
    }
  while (p->relayoutPending()) run_events(1);
  run_events(1);
  QObject::disconnect(on_frame);
  std::printf("  %-44s %d (laid out on a worker while the nearest was drawn)\n", "byte zoom steps needing a new layout",
              relayouts);
  ok = report_min_median_max("byte zoom frame (two wheel steps, 16 ms apart)", frames, max_ms) && ok;
  // Time steps at that byte zoom: every allocation a band.
  v.zoomValue(50.0, 0);
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  ok = report_min_median_max("zoom step, bytes zoomed x1/3400", zoom_steps(v.plot(), 20), max_ms) && ok;
  std::printf("  %-44s %zu bands, %zu drawn at the last step\n", "", p->layout().size(), p->lastDrawn());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (qgetenv("QT_QPA_PLATFORM").isEmpty()) qputenv("QT_QPA_PLATFORM", "offscreen");
  int n = 1000000;
  double max_ms = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ops") && i + 1 < argc) n = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--max-ms") && i + 1 < argc) max_ms = std::atof(argv[++i]);
  }
  QApplication app(argc, argv);
  QElapsedTimer t;
  t.start();
  auto trace = big_trace(n);
  std::printf("trace: %zu ops, %zu memory events (built in %.0f ms)\n", trace->ops.size(), trace->events.size(), ms(t));
  bool ok = true;
  auto report = [&](const char* what, double v, bool checked) {
    const bool over = checked && max_ms > 0 && v > max_ms;
    ok = ok && !over;
    std::printf("  %-44s %8.2f ms%s\n", what, v, over ? "  OVER" : "");
  };
  auto report_steps = [&](const char* what, const std::vector<double>& v) {
    Stats s = stats(v);
    const bool over = max_ms > 0 && s.max > max_ms;
    ok = ok && !over;
    std::printf("  %-44s median %6.2f  mean %6.2f  max %6.2f ms (%zu steps)%s\n", what, s.median, s.mean, s.max,
                v.size(), over ? "  OVER" : "");
  };

  ok = op_track_view_bench(trace, max_ms) && ok;
  {
    std::printf("memory timeline (1400 x 500):\n");
    MemoryTimelineView v;
    v.resize(1400, 500);
    v.show();
    QApplication::processEvents();
    t.restart();
    v.setTrace(trace, "bench");
    report("load (timeline, live-tensor index, stack)", ms(t), false);
    t.restart();
    v.plot()->replot(QCustomPlot::rpImmediateRefresh);
    report("first full draw", ms(t), true);
    std::printf("  %-44s %.0f of %llu bytes\n", "plotted maximum", v.plottedMaximum(),
                static_cast<unsigned long long>(trace->peak_bytes));
    if (v.plottedMaximum() != static_cast<double>(trace->peak_bytes)) {
      std::printf("  the plotted maximum is not the peak\n");
      ok = false;
    }
    report_steps("zoom step (x0.6 in, then out)", zoom_steps(v.plot(), 20));
  }
  ok = bench_allocations(trace, max_ms) && ok;
  ok = ranks_flows_bench(n / 4, max_ms) && ok;
  ok = diff_bench(n, max_ms) && ok;
  {
    std::printf("run view (memory, schedule, ops in step; 1500 x 900):\n");
    RunView v;
    v.resize(1500, 900);
    v.show();
    QApplication::processEvents();
    // A 5 ms timer's ticks: their longest gap is the longest the GUI thread was blocked.
    QTimer tick;
    QElapsedTimer since;
    double gap = 0;
    QObject::connect(&tick, &QTimer::timeout, [&] {
      gap = std::max(gap, ms(since));
      since.restart();
    });
    bool shown = false;
    QObject::connect(&v, &RunView::loaded, [&] { shown = true; });
    tick.start(5);
    since.start();
    t.restart();
    v.setTrace(trace, "bench");
    const double call = ms(t);
    while (!shown) QApplication::processEvents(QEventLoop::AllEvents | QEventLoop::WaitForMoreEvents, 5);
    QApplication::processEvents();  // the first draw of the three
    const double load = ms(t);
    tick.stop();
    report("setTrace returns (the load goes on)", call, false);
    report("load and first draw of the three", load, false);
    report("longest the GUI thread was blocked", std::max(gap, ms(since)), true);
    // The GUI thread's part alone: the data built here first, then handed to the views.
    {
      RunView u;
      u.resize(1500, 900);
      u.show();
      QApplication::processEvents();
      const std::atomic<bool> no(false);
      t.restart();
      auto d = prepare_run_view(trace, no);
      report("building the data alone (the worker's part)", ms(t), false);
      t.restart();
      u.setData(d, "bench");
      report("handing it to the views (GUI thread)", ms(t), true);
      t.restart();
      QApplication::processEvents();
      report("... and their first draw (GUI thread)", ms(t), true);
    }
    std::vector<double> steps;
    for (int dir : {0, 1})
      for (int i = 0; i < 15; ++i) {
        t.restart();
        v.zoom(dir == 0 ? 0.6 : 1 / 0.6);  // the others follow
        v.schedule()->plot()->replot(QCustomPlot::rpImmediateRefresh);
        v.ops()->plot()->replot(QCustomPlot::rpImmediateRefresh);
        steps.push_back(ms(t));
      }
    Stats s = stats(steps);
    std::printf("  %-44s median %6.2f  mean %6.2f  max %6.2f ms (%zu steps)\n", "zoom step, all three redrawn", s.median,
                s.mean, s.max, steps.size());
  }
  if (!ok) std::printf("FAIL: over %.0f ms\n", max_ms);
  return ok ? 0 : 1;
}
