// The memory timeline's "peak" and "predicted" labels on a run whose peak is its last point and
// whose prediction equals the measured peak: at every size and zoom tried, each label's box (as
// QCustomPlot itself hit-tests it) lies inside the axis rect, and the two boxes do not overlap.
// The time axis' tick labels of the memory and op timelines never run into each other, from a
// narrow Compare-sized plot to the full width, zoomed or not.
#include <QtTest>
#include <qcustomplot.h>

#include "gui_test_util.h"
#include "views/memory_timeline_view.h"
#include "views/op_timeline_view.h"
#include "views/plot_labels.h"

using namespace remat;
using namespace remat::gui;

namespace {

// `tiny`'s step cut at its highest point: the peak is the step's last event and its end, and
// the simulator's prediction is set to the measured peak.
std::shared_ptr<const Trace> peak_at_the_end(const Trace& full) {
  auto t = std::make_shared<Trace>(full);
  const MemoryTimeline tl = memory_timeline(full);
  const std::int64_t e = tl.points[tl.peak_point].event;
  if (e < 0) return nullptr;
  const auto end = static_cast<std::size_t>(e) + 1;
  t->events.resize(end);
  t->step_end_event = end;
  t->step_end_ns = t->events.back().t_ns;
  std::erase_if(t->ops, [&](const OpRecord& o) { return o.end_ns > t->step_end_ns; });
  t->peak_bytes = tl.peak_device;
  t->predicted_peak_bytes = tl.peak_device;
  return t;
}

QCPItemText* label(QCustomPlot* p, const QString& prefix) {
  for (int i = 0; i < p->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(p->item(i)); t && t->visible() && t->text().startsWith(prefix)) return t;
  return nullptr;
}

// The pixels QCustomPlot counts as inside the label (its own hit test with no tolerance), looked
// for near where the label is expected, or over the whole plot when it reaches past that.
QRect hit_box(QCustomPlot* p, QCPItemText* t) {
  const int tolerance = p->selectionTolerance();
  p->setSelectionTolerance(0);
  const QRect whole(0, 0, p->width(), p->height());
  const QRectF guess = text_box(t, t->position->pixelPosition(), t->positionAlignment(), t->padding());
  QRect box;
  for (QRect probe : {guess.toAlignedRect().adjusted(-40, -40, 40, 40) & whole, whole}) {
    box = QRect();
    for (int y = probe.top(); y <= probe.bottom(); ++y)
      for (int x = probe.left(); x <= probe.right(); ++x)
        if (t->selectTest(QPointF(x + 0.5, y + 0.5), false) == 0) box |= QRect(x, y, 1, 1);
    const bool reaches_edge = box.left() == probe.left() || box.right() == probe.right() ||
                              box.top() == probe.top() || box.bottom() == probe.bottom();
    if (!box.isEmpty() && !reaches_edge) break;
  }
  p->setSelectionTolerance(tolerance);
  return box;
}

}  // namespace

class GuiPlotLabelsTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void peakAndPredictedLabelsStayInsideAndApart_data();
  void peakAndPredictedLabelsStayInsideAndApart();
  void timeTickLabelsNeverTouch();

 private:
  std::shared_ptr<const Trace> trace_;
};

void GuiPlotLabelsTest::initTestCase() {
  testing::isolate_settings();
  const auto full = testing::train("tiny", "none");
  QVERIFY(full->complete);
  trace_ = peak_at_the_end(*full);
  QVERIFY(trace_);
  const MemoryTimeline tl = memory_timeline(*trace_);
  QCOMPARE(tl.peak_device, trace_->peak_bytes);
  QVERIFY2(tl.peak_point + 2 >= tl.points.size(), "the peak is the last point (the step's end repeats it)");
}

void GuiPlotLabelsTest::peakAndPredictedLabelsStayInsideAndApart_data() {
  QTest::addColumn<QSize>("size");
  QTest::addColumn<double>("zoom");  // the share of the time range shown, ending at the step's end
  QTest::newRow("1200x500") << QSize(1200, 500) << 1.0;
  QTest::newRow("640x300") << QSize(640, 300) << 1.0;
  QTest::newRow("1200x500 last tenth") << QSize(1200, 500) << 0.1;
}

void GuiPlotLabelsTest::peakAndPredictedLabelsStayInsideAndApart() {
  QFETCH(QSize, size);
  QFETCH(double, zoom);
  MemoryTimelineView v;
  v.resize(size);
  v.show();
  QVERIFY(QTest::qWaitForWindowExposed(&v));
  v.setTrace(trace_, "none");
  QCustomPlot* p = v.plot();
  if (zoom < 1.0) {
    const QCPRange r = p->xAxis->range();
    p->xAxis->setRange(r.upper - zoom * r.size(), r.upper);
  }
  p->replot(QCustomPlot::rpImmediateRefresh);
  QCPItemText* peak = label(p, "peak");
  QCPItemText* predicted = label(p, "predicted");
  QVERIFY(peak);
  QVERIFY(predicted);
  const QRect area = p->axisRect()->rect();
  const QRect pb = hit_box(p, peak), qb = hit_box(p, predicted);
  QVERIFY(!pb.isEmpty() && !qb.isEmpty());
  // The case is the hard one: the peak's point is at the plot's right edge...
  const double px = p->xAxis->coordToPixel(static_cast<double>(trace_->step_end_ns - trace_->step_start_ns));
  QVERIFY2(px > area.right() - pb.width(), qPrintable(QString("peak at %1 px, right edge %2").arg(px).arg(area.right())));
  // ... and the prediction's line at its height.
  const auto str = [](const QRect& r) { return QString("(%1,%2 %3x%4)").arg(r.x()).arg(r.y()).arg(r.width()).arg(r.height()); };
  QVERIFY2(area.contains(pb), qPrintable("peak label " + str(pb) + " outside the axis rect " + str(area)));
  QVERIFY2(area.contains(qb), qPrintable("predicted label " + str(qb) + " outside the axis rect " + str(area)));
  QVERIFY2(!pb.intersects(qb), qPrintable("peak " + str(pb) + " overlaps predicted " + str(qb)));
  // The geometry the placement works with is QCustomPlot's (within the rounding of a pixel).
  for (auto [t, hit] : {std::pair{peak, pb}, std::pair{predicted, qb}}) {
    const QRectF box = text_box(t, t->position->pixelPosition(), t->positionAlignment(), t->padding());
    QVERIFY2(std::abs(box.left() - hit.left()) <= 1 && std::abs(box.top() - hit.top()) <= 1 &&
                 std::abs(box.width() - hit.width()) <= 1 && std::abs(box.height() - hit.height()) <= 1,
             qPrintable(QString("'%1': computed %2,%3 %4x%5, hit-tested %6,%7 %8x%9").arg(t->text())
                            .arg(box.left()).arg(box.top()).arg(box.width()).arg(box.height())
                            .arg(hit.left()).arg(hit.top()).arg(hit.width()).arg(hit.height())));
  }
}

void GuiPlotLabelsTest::timeTickLabelsNeverTouch() {
  // Each pair of neighbouring labels, as the axis draws them centered on their ticks, at least
  // 4 px apart.
  auto check = [](QCustomPlot* p, const QString& what, int* count = nullptr, bool replot = true) {
    if (replot) p->replot();
    QCPAxis* x = p->xAxis;
    const QFontMetrics fm(x->tickLabelFont());
    const QVector<double> ticks = x->tickVector();
    const QVector<QString> labels = x->tickVectorLabels();
    int shown = 0;
    double prev_right = -1e9;
    for (int i = 0; i < ticks.size(); ++i) {
      if (!x->range().contains(ticks[i])) continue;
      const double c = x->coordToPixel(ticks[i]), w = fm.horizontalAdvance(labels[i]);
      QVERIFY2(c - w / 2 >= prev_right + 4,
               qPrintable(QString("%1: '%2' at %3 px runs into the label before it").arg(what, labels[i]).arg(c)));
      prev_right = c + w / 2;
      ++shown;
    }
    QVERIFY2(shown >= 2, qPrintable(what + ": fewer than two time labels"));
    if (count) *count = shown;
  };
  for (int width : {320, 420, 560, 800, 1280}) {
    MemoryTimelineView m;
    m.resize(width, 400);
    m.show();
    m.setTrace(trace_, "none");
    check(m.plot(), QString("memory timeline %1 px").arg(width));
    m.plot()->xAxis->scaleRange(0.013, m.plot()->xAxis->range().center());
    check(m.plot(), QString("memory timeline %1 px, zoomed").arg(width));
    OpTimelineView o;
    o.resize(width, 300);
    o.show();
    o.setTrace(trace_, m.origin(), static_cast<std::int64_t>(m.dataTimeRange().upper));
    check(o.plot(), QString("op timeline %1 px").arg(width));
  }
  // Made narrow, then widened: the first replot at the new width labels it as wide (the ticks
  // are made before that replot's layout).
  MemoryTimelineView m;
  m.resize(320, 400);
  m.show();
  m.setTrace(trace_, "none");
  m.plot()->replot();
  m.resize(1280, 400);  // the plot's resize event replots it once, at the new size
  int shown = 0, fresh_shown = 0;
  check(m.plot(), "memory timeline widened to 1280 px", &shown, false);  // what that replot drew
  // As many labels as a view made at that width.
  MemoryTimelineView fresh;
  fresh.resize(1280, 400);
  fresh.show();
  fresh.setTrace(trace_, "none");
  check(fresh.plot(), "memory timeline made at 1280 px", &fresh_shown);
  QCOMPARE(m.plot()->xAxis->range().size(), fresh.plot()->xAxis->range().size());
  QVERIFY2(shown == fresh_shown, qPrintable(QString("%1 time labels widened, %2 made at the width").arg(shown).arg(fresh_shown)));
}

QTEST_MAIN(GuiPlotLabelsTest)
#include "gui_plot_labels_test.moc"
