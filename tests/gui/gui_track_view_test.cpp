// The op timeline's track view, offscreen: each slice keeps its own edges at the op's start and
// end at several zoom levels (and two adjacent ops are two slices, with an empty column between
// them in the image), the nested levels of a CPU and a CUDA run, search with next / previous,
// the time-range table, the statistics table against the trace's sums and its CSV export, and
// the details of a clicked op with the memory it allocated; tracks pinned on top, hidden, moved
// (by call and by dragging a label) and reset, the bars following their tracks.
#include <QApplication>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMouseEvent>
#include <QSortFilterProxyModel>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <map>
#include <set>
#include <qcustomplot.h>

#include "core/trace/csv.h"
#include "core/trace/run_dir.h"
#include "gui_test_util.h"
#include "theme.h"
#include "views/op_stats_table.h"
#include "views/op_timeline_pane.h"
#include "views/op_timeline_view.h"
#include "views/schedule_strip.h"
#include "views/span_plottable.h"

using namespace remat;
using namespace remat::gui;

namespace {

// A CPU step of 4 blocks: forward, backward, optimizer; durations from 60 to 420 ns, every
// third op right against the next (no gap), each op allocating and half the ops freeing.
std::shared_ptr<Trace> toy_trace() {
  auto t = std::make_shared<Trace>();
  t->device = "cpu";
  t->model.layers = 4;
  const char* types[] = {"ln", "attn", "mlp.fc", "mlp.proj"};
  std::int64_t now = 1000;
  std::uint64_t id = 1;
  auto add = [&](Phase p, int block, const std::string& type) {
    OpRecord o;
    o.start_ns = now;
    o.end_ns = now + 60 + static_cast<std::int64_t>((id * 37) % 7) * 60;
    o.phase = p;
    o.block = block;
    o.op = type;
    o.name = block >= 0 ? "h" + std::to_string(block) + "." + type : type;
    o.op_id = id;
    o.flops = 100 * id;
    o.bytes = 8 * id;
    o.step = 1;
    t->ops.push_back(o);
    MemoryEvent a;
    a.t_ns = now;
    a.delta = static_cast<std::int64_t>(64 * id);
    a.op_seq = id;
    t->events.push_back(a);
    if (id % 2 == 0) {
      MemoryEvent f = a;
      f.t_ns = o.end_ns;
      f.delta = -32;
      t->events.push_back(f);
    }
    now = o.end_ns + (id % 3 == 0 ? 0 : 10);
    ++id;
  };
  add(Phase::Forward, -1, "embedding");
  for (int b = 0; b < 4; ++b)
    for (const char* ty : types) add(Phase::Forward, b, ty);
  for (int b = 3; b >= 0; --b)
    for (const char* ty : types) add(Phase::Backward, b, ty);
  add(Phase::Optimizer, -1, "adamw");
  OpRecord copy = t->ops[3];
  copy.stream = Stream::CopyToHost;
  copy.name = "offload h0";
  copy.op = "offload";
  t->ops.push_back(copy);
  t->step_start_ns = 1000;
  t->step_end_ns = now;
  t->step_first_event = 0;
  t->step_end_event = t->events.size();
  StepStats st;
  st.step = 1;
  st.start_ns = 1000;
  st.end_ns = now;
  t->step_stats = {st};
  return t;
}

}  // namespace

class GuiTrackViewTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void slicesKeepTheOpsEdgesAtEveryZoom();
  void cpuAndCudaRunsNestTheirLevels();
  void searchCyclesThroughTheMatches();
  void rangeSelectionCountsTheOpsInIt();
  void statsTableSumsToTheTraceAndExports();
  void statsTableSplitsEachRowByPhaseAndSaysWhatRecomputationCost();
  void clickShowsDetailsAndMemory();
  void scheduleStripGivesTheHeadItsOwnLabelledRow();
  void tracksArePinnedHiddenAndMoved();

 private:
  std::shared_ptr<const Trace> tiny_;
};

void GuiTrackViewTest::initTestCase() {
  testing::isolate_settings();
  tiny_ = testing::train("tiny", "none");
  QVERIFY(tiny_->complete);
}

void GuiTrackViewTest::slicesKeepTheOpsEdgesAtEveryZoom() {
  const auto t = toy_trace();
  OpTimelineView v;
  v.resize(1400, 320);
  v.show();
  const std::int64_t origin = t->step_start_ns, duration = t->step_end_ns - t->step_start_ns;
  v.setTrace(t, origin, duration);
  const int leaf = v.tree().leaf_track(Stream::Compute);
  QCOMPARE(v.tree().tracks()[static_cast<std::size_t>(leaf)].level, SliceLevel::Op);
  const auto& order = v.tree().stream_ops(Stream::Compute);
  QCPAxis* x = v.plot()->xAxis;
  int checked_edges = 0, checked_pairs = 0, gap_columns = 0;
  // The whole step, a third, a few ops, two ops.
  const double sizes[] = {static_cast<double>(duration), duration / 3.0, 1500.0, 500.0};
  for (double size : sizes) {
    const double lower = std::min(static_cast<double>(duration) - size, 0.37 * static_cast<double>(duration));
    x->setRange(std::max(0.0, lower), std::max(0.0, lower) + size);
    v.plot()->replot(QCustomPlot::rpImmediateRefresh);
    const QImage img = v.plot()->toPixmap().toImage();
    std::map<std::uint32_t, SpanPlottable::DrawnBar> bar_of;
    for (const auto& b : v.bars()->lastBars())
      if (b.row == static_cast<std::size_t>(leaf)) {
        QVERIFY2(!bar_of.count(b.index) || b.count > 1, "an op drawn twice");
        if (b.count == 1) bar_of[b.index] = b;
      }
    auto px = [&](std::int64_t t_ns) { return static_cast<int>(std::lround(x->coordToPixel(static_cast<double>(t_ns - origin)))); };
    const int left = v.plot()->axisRect()->left(), right = v.plot()->axisRect()->right();
    for (std::uint32_t i = 0; i < order.size(); ++i) {
      const OpRecord& o = t->ops[order[i]];
      const int a = px(o.start_ns), b = px(o.end_ns);
      if (b - a < 4 || a < left || b > right) continue;
      // A slice of its own whose edges are the op's.
      QVERIFY2(bar_of.count(i), qPrintable(QString("op %1 (%2 px) has no slice of its own").arg(i).arg(b - a)));
      QCOMPARE(bar_of[i].x0, a);
      QCOMPARE(bar_of[i].x1, b);
      ++checked_edges;
      // Its last column is left empty, the one before is the phase's color.
      const int y = static_cast<int>(v.plot()->yAxis->coordToPixel(leaf));
      QVERIFY(img.pixelColor(b - 1, y).rgb() != phase_color(o.phase).rgb());
      QCOMPARE(img.pixelColor(b - 2, y).rgb(), phase_color(o.phase).rgb());
      ++gap_columns;
      if (i + 1 < order.size()) {
        const OpRecord& n = t->ops[order[i + 1]];
        if (px(n.end_ns) - px(n.start_ns) >= 4 && px(n.end_ns) <= right) {
          QVERIFY(bar_of.count(i + 1));
          QVERIFY(bar_of[i].x1 <= bar_of[i + 1].x0);  // two slices, never one
          ++checked_pairs;
        }
      }
    }
  }
  QVERIFY2(checked_edges > 40, qPrintable(QString::number(checked_edges)));
  QVERIFY(checked_pairs > 20);
  QVERIFY(gap_columns == checked_edges);
}

void GuiTrackViewTest::cpuAndCudaRunsNestTheirLevels() {
  // The tiny run on the CPU: step > phase > block > op, an op a record.
  const SliceTree cpu(*tiny_);
  QVERIFY(!cpu.has_kernels());
  const auto& tr = cpu.tracks();
  QVERIFY(tr.size() >= 4);
  QCOMPARE(tr[0].level, SliceLevel::Step);
  QCOMPARE(tr[1].level, SliceLevel::Phase);
  QCOMPARE(tr[2].level, SliceLevel::Block);
  QCOMPARE(tr[3].level, SliceLevel::Op);
  QCOMPARE(tr[3].slices.size(), cpu.stream_ops(Stream::Compute).size());
  QCOMPARE(tr[0].slices.size(), std::size_t{1});
  std::set<int> blocks;
  for (const Slice& b : tr[2].slices) {
    const Slice& p = tr[1].slices[b.parent];
    QVERIFY(p.start <= b.start && b.end <= p.end);
    QCOMPARE(p.phase, b.phase);
    blocks.insert(b.block);
  }
  QCOMPARE(static_cast<int>(blocks.size()), tiny_->model.layers);
  for (std::size_t i = 0; i < tr[3].slices.size(); ++i) {
    const Slice& s = tr[3].slices[i];
    const OpRecord& o = tiny_->ops[cpu.stream_ops(Stream::Compute)[s.first]];
    QCOMPARE(s.start, o.start_ns);
    QCOMPARE(s.end, o.end_ns);
    QCOMPARE(tr[1].slices[s.parent].phase, o.phase);
    if (i > 0) QVERIFY(tr[3].slices[i - 1].end <= s.start);  // one op after another
  }
  // Phases in order, each a maximal run: no two neighbours share a phase.
  for (std::size_t i = 1; i < tr[1].slices.size(); ++i) QVERIFY(tr[1].slices[i - 1].phase != tr[1].slices[i].phase);

  // A CUDA run: the kernels of one executor op are one op slice.
  const auto h200 = std::make_shared<const Trace>(read_run_dir((remat::gui::testing::gui_test_data() + "/cuda-tiny-offload").toStdString()));
  const SliceTree cuda(*h200);
  QVERIFY(cuda.has_kernels());
  const auto& ct = cuda.tracks();
  QCOMPARE(ct[3].level, SliceLevel::Op);
  QCOMPARE(ct[4].level, SliceLevel::Kernel);
  QCOMPARE(ct[4].slices.size(), cuda.stream_ops(Stream::Compute).size());
  QVERIFY(ct[3].slices.size() < ct[4].slices.size());
  const auto& order = cuda.stream_ops(Stream::Compute);
  for (const Slice& k : ct[4].slices) {
    const Slice& op = ct[3].slices[k.parent];
    QCOMPARE(h200->ops[order[op.first]].op_id, h200->ops[order[k.first]].op_id);
    QVERIFY(op.start <= k.start && k.end <= op.end);
  }
  OpTimelineView v;
  v.resize(1400, 300);
  v.show();
  v.setTrace(h200, h200->step_start_ns, h200->step_end_ns - h200->step_start_ns);
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  auto* ticker = dynamic_cast<QCPAxisTickerText*>(v.plot()->yAxis->ticker().data());
  QVERIFY(ticker);
  QStringList labels;
  for (const QString& s : ticker->ticks()) labels << s;
  QCOMPARE(labels, QStringList({"step", "phase", "block", "op", "kernel", "to host", "to device"}));
}

void GuiTrackViewTest::searchCyclesThroughTheMatches() {
  const auto t = toy_trace();
  OpTimelinePane pane;
  pane.resize(1400, 360);
  pane.show();
  QVERIFY(QTest::qWaitForWindowExposed(&pane));
  pane.setTrace(t, t->step_start_ns, t->step_end_ns - t->step_start_ns);
  OpTimelineView* v = pane.view();
  int expect = 0;
  for (const auto& o : t->ops) expect += o.name.find("h2.mlp") != std::string::npos;
  QCOMPARE(expect, 4);  // fc and proj, forward and backward
  pane.activateWindow();
  QVERIFY(QTest::qWaitForWindowActive(&pane));
  QTest::keyClick(&pane, Qt::Key_F, Qt::ControlModifier);
  QTRY_VERIFY(pane.searchBox()->hasFocus());
  QTest::keyClicks(pane.searchBox(), "H2.MLP");
  QCOMPARE(v->matchCount(), expect);
  QCOMPARE(v->currentMatch(), -1);
  std::int64_t last_start = -1;
  for (int k = 0; k < expect; ++k) {
    QTest::keyClick(pane.searchBox(), Qt::Key_Return);
    QCOMPARE(v->currentMatch(), k);
    QCOMPARE(pane.matchLabel()->text(), QString("%1 of %2").arg(k + 1).arg(expect));
    const OpRecord& o = t->ops[v->matchOp(k)];
    QVERIFY(o.start_ns > last_start);  // in time order
    last_start = o.start_ns;
    // Selected, in view and wide enough to see.
    const auto [track, slice] = v->selectedSlice();
    QCOMPARE(track, v->tree().leaf_track(Stream::Compute));
    const Slice& s = v->tree().tracks()[static_cast<std::size_t>(track)].slices[static_cast<std::size_t>(slice)];
    QCOMPARE(s.start, o.start_ns);
    const QCPRange r = v->plot()->xAxis->range();
    QVERIFY(r.lower <= static_cast<double>(o.start_ns - t->step_start_ns));
    QVERIFY(r.upper >= static_cast<double>(o.end_ns - t->step_start_ns));
    QVERIFY(v->plot()->xAxis->coordToPixel(static_cast<double>(o.end_ns - t->step_start_ns)) -
                v->plot()->xAxis->coordToPixel(static_cast<double>(o.start_ns - t->step_start_ns)) >= 8);
    QVERIFY(pane.details()->text().contains(QString::fromStdString(o.name)));
  }
  QTest::keyClick(pane.searchBox(), Qt::Key_Return);  // wraps to the first
  QCOMPARE(v->currentMatch(), 0);
  QTest::keyClick(pane.searchBox(), Qt::Key_Return, Qt::ShiftModifier);  // and back to the last
  QCOMPARE(v->currentMatch(), expect - 1);
  QCOMPARE(pane.matchLabel()->text(), QString("%1 of %1").arg(expect));
  v->previous();
  QCOMPARE(v->currentMatch(), expect - 2);
  pane.searchBox()->setText("no such op");
  QCOMPARE(v->matchCount(), 0);
  QCOMPARE(pane.matchLabel()->text(), QString("no match"));
}

void GuiTrackViewTest::rangeSelectionCountsTheOpsInIt() {
  const auto t = toy_trace();
  OpTimelinePane pane;
  pane.resize(1400, 360);
  pane.show();
  QVERIFY(QTest::qWaitForWindowExposed(&pane));
  const std::int64_t origin = t->step_start_ns;
  pane.setTrace(t, origin, t->step_end_ns - origin);
  OpTimelineView* v = pane.view();
  v->plot()->replot(QCustomPlot::rpImmediateRefresh);
  // Shift+drag from 20 % to 45 % of the plot's width.
  QCustomPlot* p = v->plot();
  const QRect ar = p->axisRect()->rect();
  const QPointF a(ar.left() + 0.20 * ar.width(), ar.center().y()), b(ar.left() + 0.45 * ar.width(), ar.center().y());
  auto send = [&](QEvent::Type type, QPointF at, Qt::MouseButtons buttons) {
    QMouseEvent e(type, at, p->mapToGlobal(at), Qt::LeftButton, buttons, Qt::ShiftModifier);
    QApplication::sendEvent(p, &e);
  };
  send(QEvent::MouseButtonPress, a, Qt::LeftButton);
  send(QEvent::MouseMove, (a + b) / 2, Qt::LeftButton);
  send(QEvent::MouseMove, b, Qt::LeftButton);
  send(QEvent::MouseButtonRelease, b, Qt::NoButton);
  const auto [t0, t1] = v->timeRange();
  QVERIFY(t1 > t0);
  const double k0 = p->xAxis->pixelToCoord(a.x()), k1 = p->xAxis->pixelToCoord(b.x());
  QVERIFY(std::abs(static_cast<double>(t0 - origin) - k0) < 2 * (k1 - k0) / (b.x() - a.x()));
  QVERIFY(std::abs(static_cast<double>(t1 - origin) - k1) < 2 * (k1 - k0) / (b.x() - a.x()));
  QCOMPARE(p->xAxis->range().lower, 0.0);  // a selection, not a pan
  // The table counts exactly the ops that overlap the range, per type.
  std::map<std::string, std::uint64_t> expect;
  std::uint64_t total = 0;
  for (const auto& o : t->ops)
    if (o.end_ns >= t0 && o.start_ns <= t1) {
      ++expect[o.op];
      ++total;
    }
  QVERIFY(total > 5);
  std::map<std::string, std::uint64_t> got;
  for (const OpStat& s : pane.rangeTable()->stats()) got[s.key] = s.count;
  QVERIFY(got == expect);
  QCOMPARE(pane.tabs()->currentIndex(), 1);
  QCOMPARE(pane.rangeTable()->proxy()->rowCount(), static_cast<int>(expect.size()));
  // A Shift+click clears it.
  send(QEvent::MouseButtonPress, a, Qt::LeftButton);
  send(QEvent::MouseButtonRelease, a, Qt::NoButton);
  QVERIFY(v->timeRange().second < v->timeRange().first);
  QVERIFY(pane.rangeTable()->stats().empty());
}

void GuiTrackViewTest::statsTableSumsToTheTraceAndExports() {
  OpTimelinePane pane;
  pane.resize(1400, 360);
  pane.setTrace(tiny_, tiny_->step_start_ns, tiny_->step_end_ns - tiny_->step_start_ns);
  OpStatsTable* st = pane.statsTable();
  for (OpStatKey key : {OpStatKey::OpType, OpStatKey::Kernel}) {
    st->setKey(key);
    std::uint64_t count = 0;
    std::int64_t total = 0, trace_total = 0;
    for (const OpStat& s : st->stats()) {
      count += s.count;
      total += s.total_ns;
      QVERIFY(s.min_ns <= s.mean_ns() && s.mean_ns() <= s.max_ns);
    }
    for (const auto& o : tiny_->ops) trace_total += o.end_ns - o.start_ns;
    QCOMPARE(count, tiny_->ops.size());
    QCOMPARE(total, trace_total);
    QCOMPARE(st->proxy()->rowCount(), static_cast<int>(st->stats().size()));
  }
  // Sorted by count, numerically, both ways.
  st->setKey(OpStatKey::OpType);
  QSortFilterProxyModel* m = st->proxy();
  QVERIFY(m->rowCount() > 3);
  for (Qt::SortOrder order : {Qt::AscendingOrder, Qt::DescendingOrder}) {
    st->table()->sortByColumn(OpStatsTable::Count, order);
    for (int r = 1; r < m->rowCount(); ++r) {
      const auto prev = m->index(r - 1, OpStatsTable::Count).data(OpStatsTable::kSortRole).toULongLong();
      const auto cur = m->index(r, OpStatsTable::Count).data(OpStatsTable::kSortRole).toULongLong();
      QVERIFY(order == Qt::AscendingOrder ? prev <= cur : prev >= cur);
    }
  }
  // CSV round trip through core's reader.
  QTemporaryDir dir;
  const QString path = dir.filePath("op_stats.csv");
  QString err;
  QVERIFY2(st->exportCsv(path, &err), qPrintable(err));
  csv::Reader r(path.toStdString());
  const std::size_t ck = r.col("key"), cc = r.col("count"), ct = r.col("total_us"), cmax = r.col("max_us");
  std::size_t row = 0;
  while (r.next()) {
    const OpStat& s = st->stats()[row++];
    QCOMPARE(std::string(r.str(ck)), s.key);
    QCOMPARE(r.u64(cc), s.count);
    QCOMPARE(r.f64(ct), static_cast<double>(s.total_ns) / 1e3);
    QCOMPARE(r.f64(cmax), static_cast<double>(s.max_ns) / 1e3);
  }
  QCOMPARE(row, st->stats().size());
  QVERIFY(!st->exportCsv(dir.filePath("no/such/dir/x.csv"), &err));
  QVERIFY(!err.isEmpty());
}

void GuiTrackViewTest::statsTableSplitsEachRowByPhaseAndSaysWhatRecomputationCost() {
  const auto uniform = testing::train("tiny", "uniform");
  QVERIFY(uniform->complete);
  std::int64_t recompute = 0;
  for (const auto& o : uniform->ops)
    if (o.phase == Phase::Recompute) recompute += std::max<std::int64_t>(0, o.end_ns - o.start_ns);
  QVERIFY(recompute > 0);
  OpTimelinePane pane;
  pane.resize(1400, 360);
  pane.setTrace(uniform, uniform->step_start_ns, uniform->step_end_ns - uniform->step_start_ns);
  OpStatsTable* st = pane.statsTable();
  for (OpStatKey key : {OpStatKey::OpType, OpStatKey::Kernel, OpStatKey::Block}) {
    st->setKey(key);
    QSortFilterProxyModel* m = st->proxy();
    std::int64_t column = 0;
    for (int r = 0; r < m->rowCount(); ++r) {
      column += m->index(r, OpStatsTable::Recompute).data(OpStatsTable::kSortRole).toLongLong();
      std::int64_t phases = 0;
      for (int c : {OpStatsTable::Forward, OpStatsTable::Recompute, OpStatsTable::Backward, OpStatsTable::Optimizer})
        phases += m->index(r, c).data(OpStatsTable::kSortRole).toLongLong();
      QCOMPARE(phases, m->index(r, OpStatsTable::Total).data(OpStatsTable::kSortRole).toLongLong());
    }
    QCOMPARE(column, recompute);
    QVERIFY2(st->recomputeText().contains("recomputation"), qPrintable(st->recomputeText()));
  }
  // Per block: a row per block and one for the ops outside them.
  QCOMPARE(st->proxy()->rowCount(), uniform->model.layers + 1);
  // Without recomputation the line says nothing.
  pane.setTrace(tiny_, tiny_->step_start_ns, tiny_->step_end_ns - tiny_->step_start_ns);
  QVERIFY(st->recomputeText().isEmpty());
}

void GuiTrackViewTest::clickShowsDetailsAndMemory() {
  const auto t = toy_trace();
  OpTimelinePane pane;
  pane.resize(1400, 360);
  pane.show();
  QVERIFY(QTest::qWaitForWindowExposed(&pane));
  const std::int64_t origin = t->step_start_ns;
  pane.setTrace(t, origin, t->step_end_ns - origin);
  OpTimelineView* v = pane.view();
  // Zoom on op 6 and click its middle.
  const OpRecord& o = t->ops[6];
  v->showTime(o.start_ns, o.end_ns);
  v->plot()->replot(QCustomPlot::rpImmediateRefresh);
  const int leaf = v->tree().leaf_track(Stream::Compute);
  const QPoint at(static_cast<int>(v->plot()->xAxis->coordToPixel(static_cast<double>((o.start_ns + o.end_ns) / 2 - origin))),
                  static_cast<int>(v->plot()->yAxis->coordToPixel(leaf)));
  QTest::mouseClick(v->plot(), Qt::LeftButton, Qt::NoModifier, at);
  QVERIFY(v->selectedSlice() == std::make_pair(leaf, 6));
  const QString d = pane.details()->text();
  QVERIFY(d.contains(QString::fromStdString(o.name)));
  QVERIFY(d.contains("block</b></td><td>" + QString::number(o.block)));
  QVERIFY(d.contains("forward"));
  // Op id 7 allocated 7 * 64 bytes once and freed nothing (odd ids free nothing).
  QVERIFY2(d.contains("<b>allocated</b></td><td>448 B in 1"), qPrintable(d));
  QVERIFY(d.contains("<b>freed</b></td><td>0 B in 0"));
  // The block slice above it sums its four ops.
  const int block_track = 2;
  const Slice& b = v->tree().tracks()[block_track].slices[1];
  const QString bd = v->sliceDetails(block_track, 1);
  std::uint64_t alloc = 0;
  for (std::uint32_t k = b.first; k < b.last; ++k) alloc += 64 * t->ops[v->tree().stream_ops(Stream::Compute)[k]].op_id;
  QVERIFY(bd.contains("block 1"));
  QVERIFY(bd.contains("in 4</td>"));  // four allocations
  QVERIFY(alloc > 0);
}

void GuiTrackViewTest::scheduleStripGivesTheHeadItsOwnLabelledRow() {
  ScheduleStrip s;
  s.resize(1200, 150);
  s.show();
  QVERIFY(QTest::qWaitForWindowExposed(&s));
  s.setTrace(tiny_, tiny_->step_start_ns, tiny_->step_end_ns - tiny_->step_start_ns);
  s.plot()->replot(QCustomPlot::rpImmediateRefresh);
  QApplication::processEvents();
  const int L = tiny_->model.layers;
  const SpanRows* rows = s.bars()->rows();
  QVERIFY(rows->rows() >= static_cast<std::size_t>(L) + 1);
  // The head's record (numbered with the last block) sits on row L, alone.
  std::size_t heads = 0;
  for (std::size_t r = 0; r < rows->rows(); ++r)
    for (const Span& sp : rows->row(r)) {
      const ScheduleRecord& rec = tiny_->schedule_records[sp.index];
      if (rec.action == kHeadAction) {
        QCOMPARE(r, static_cast<std::size_t>(L));
        ++heads;
      } else if (r == static_cast<std::size_t>(L)) {
        QFAIL("a record other than the head on the head's row");
      }
    }
  QVERIFY(heads >= 1);
  // Every row labelled: 150 px hold them.
  auto* ticker = dynamic_cast<QCPAxisTickerText*>(s.plot()->yAxis->ticker().data());
  QVERIFY(ticker);
  QCOMPARE(ticker->ticks().size(), static_cast<int>(rows->rows()));
  QCOMPARE(ticker->ticks().value(L), QString("head"));
  QCOMPARE(ticker->ticks().value(0), QString("h0"));
}

void GuiTrackViewTest::tracksArePinnedHiddenAndMoved() {
  const auto t = toy_trace();
  OpTimelineView v;
  v.resize(1400, 420);
  v.show();
  QVERIFY(QTest::qWaitForWindowExposed(&v));
  v.setTrace(t, t->step_start_ns, t->step_end_ns - t->step_start_ns);
  const int n = static_cast<int>(v.tree().tracks().size());
  QVERIFY(n >= 5);
  const QStringList plain = v.rowLabels();
  std::vector<int> identity(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) identity[static_cast<std::size_t>(i)] = i;
  QCOMPARE(v.shownTracks(), identity);
  const int leaf = v.tree().leaf_track(Stream::Compute);
  const QRect ar = v.plot()->axisRect()->rect();
  // The x of the middle of a leaf slice, and the pixel row of display position p.
  const Slice& mid = v.tree().tracks()[static_cast<std::size_t>(leaf)].slices[6];
  const int x = static_cast<int>(v.plot()->xAxis->coordToPixel(static_cast<double>((mid.start + mid.end) / 2 - v.timeOrigin())));
  auto y_of = [&](int p) { return static_cast<int>(v.plot()->yAxis->coordToPixel(p)); };

  // Pinned: on top, marked, and what is drawn there is its slices.
  v.setTrackPinned(leaf, true);
  QCOMPARE(v.shownTracks().front(), leaf);
  QCOMPARE(v.rowLabels().front(), "⚑ " + plain[leaf]);
  QCOMPARE(v.sliceAt(QPointF(x, y_of(0))).first, leaf);
  QCOMPARE(v.trackAt(QPoint(ar.left() - 20, y_of(0))), leaf);  // its label
  QCOMPARE(v.trackAt(QPoint(ar.left() + 5, y_of(0))), leaf);
  QCOMPARE(v.trackAt(QPoint(ar.left() + 5, ar.bottom() + 10)), -1);  // under the rows
  // Hidden: gone from the labels and the bars.
  const int step = 0;
  v.setTrackHidden(step, true);
  QCOMPARE(static_cast<int>(v.shownTracks().size()), n - 1);
  QVERIFY(!v.rowLabels().contains(plain[step]));
  v.plot()->replot();
  for (const auto& b : v.bars()->lastBars()) QVERIFY(static_cast<int>(b.row) != step);
  // Moved to the bottom, then dragged back to the top by its label.
  const int phase = 1;
  v.moveTrack(phase, n - 2);
  QCOMPARE(v.shownTracks().back(), phase);
  const int last = static_cast<int>(v.shownTracks().size()) - 1;
  QTest::mousePress(v.plot(), Qt::LeftButton, {}, QPoint(ar.left() - 20, y_of(last)));
  QTest::mouseRelease(v.plot(), Qt::LeftButton, {}, QPoint(ar.left() - 20, y_of(0)));
  QCOMPARE(v.shownTracks().front(), phase);
  QVERIFY(v.trackPinned(phase));  // among the pinned ones, so pinned
  QCOMPARE(v.sliceAt(QPointF(x, y_of(0))).first, phase);
  // The last shown track cannot be hidden.
  for (int r = 0; r < n; ++r) v.setTrackHidden(r, true);
  QCOMPARE(v.shownTracks().size(), std::size_t{1});
  // Another run of the same tracks keeps the arrangement; reset undoes it.
  v.setTrackHidden(step, false);
  v.setTrackHidden(leaf, false);
  const std::vector<int> arranged = v.shownTracks();
  v.setTrace(t, t->step_start_ns, t->step_end_ns - t->step_start_ns);
  QCOMPARE(v.shownTracks(), arranged);
  v.resetTracks();
  QCOMPARE(v.shownTracks(), identity);
  QCOMPARE(v.rowLabels(), plain);
}

QTEST_MAIN(GuiTrackViewTest)
#include "gui_track_view_test.moc"
