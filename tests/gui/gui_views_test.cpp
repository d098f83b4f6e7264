// The views on real traces, offscreen: the compare view (shared axis, groups of like runs with
// their own scales, the frontier of checked runs only, overheads within noise, colors by policy),
// export that reads back, the ledger following a click on the memory timeline, the analysis
// tables, and zooming on a million-op timeline.
#include <QDir>
#include <QFile>
#include <QImage>
#include <QApplication>
#include <QPixmap>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QRegularExpression>
#include <QScrollArea>
#include <QScrollBar>
#include <QtTest>
#include <nlohmann/json.hpp>
#include <qcustomplot.h>

#include "core/analysis/block_formula.h"
#include "core/analysis/frontier.h"
#include "core/trace/csv.h"
#include "core/trace/run_dir.h"
#include "core/util/error.h"
#include "export.h"
#include "format.h"
#include "import_open.h"
#include "gui_test_util.h"
#include "run_list.h"
#include "views/analysis_view.h"
#include "views/compare_charts.h"
#include "views/compare_overlay.h"
#include "views/compare_view.h"
#include "views/ledger_view.h"
#include "views/memory_timeline_view.h"
#include "views/op_timeline_view.h"
#include "views/run_view.h"
#include "views/span_plottable.h"
#include "theme.h"

using namespace remat;
using namespace remat::gui;

class GuiViewsTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  // No test here may leave a QPainter warning (a plot drawn before it had a size did).
  void init() { QTest::failOnWarning(QRegularExpression("QPainter")); }
  void compareStacksRunsOnOneSharedAxis();
  void compareFrontierIgnoresUncheckedAndCancelledRuns();
  void compareDrawsTheBudgetLineWithTheRuns();
  void compareGroupsUnlikeRunsWithTheirOwnScales();
  void compareMarksOverheadsWithinNoise();
  void scatterNamesLeaveTheOtherPointsFree();
  void compareSetsARankOnlyAgainstRunsOfItsLayout();
  void anImportedTraceIsNotComparedUnaskedAndIsNamedByItsFile();
  void colorsFollowThePolicyNotThePosition();
  void exportWritesFilesThatReadBack();
  void clickOnTheTimelineSelectsLedgerRows();
  void analysisShowsTheFormulaNextToTheMeasuredBytes();
  void opTimelineOfAMillionOpsZooms();
  void cudaRunsShowReservedBytesAndHostLine();
  void aRecordedH200RunOpens();

 private:
  std::shared_ptr<const Trace> none_, uniform_;
  QTemporaryDir tmp_;
};

void GuiViewsTest::initTestCase() {
  testing::isolate_settings();
  none_ = testing::train("tiny", "none");
  uniform_ = testing::train("tiny", "uniform");
  QVERIFY(none_->complete);
  QVERIFY(uniform_->complete);
}

void GuiViewsTest::compareStacksRunsOnOneSharedAxis() {
  RunListModel list;
  list.add(none_, {});
  list.add(uniform_, {});
  CompareView v;
  v.resize(1200, 900);
  v.show();
  v.setRuns(list.checked());
  const auto tl = v.timelines();
  QCOMPARE(tl.size(), 2);
  QCOMPARE(tl[0]->trace().get(), none_.get());
  QCOMPARE(tl[1]->trace().get(), uniform_.get());
  for (auto* t : tl) QVERIFY(t->isVisible());
  // One axis range for both: the longer step's, and one byte scale.
  const QCPRange r0 = tl[0]->plot()->xAxis->range(), r1 = tl[1]->plot()->xAxis->range();
  QCOMPARE(r0.lower, r1.lower);
  QCOMPARE(r0.upper, r1.upper);
  QCOMPARE(r0.upper, std::max(tl[0]->dataTimeRange().upper, tl[1]->dataTimeRange().upper));
  QCOMPARE(tl[0]->plot()->yAxis->range().upper, tl[1]->plot()->yAxis->range().upper);
  // Each shows its own peak.
  QCOMPARE(tl[0]->plottedMaximum(), static_cast<double>(none_->peak_bytes));
  QCOMPARE(tl[1]->plottedMaximum(), static_cast<double>(uniform_->peak_bytes));
  // Zooming one moves the other.
  tl[1]->plot()->xAxis->setRange(r0.upper * 0.25, r0.upper * 0.5);
  QCOMPARE(tl[0]->plot()->xAxis->range().lower, r0.upper * 0.25);
  QCOMPARE(tl[0]->plot()->xAxis->range().upper, r0.upper * 0.5);
  // Normalized to step time: both span [0, 1].
  v.setTimeMode(TimeMode::Normalized);
  const auto tn = v.timelines();
  QCOMPARE(tn.size(), 2);
  for (auto* t : tn) {
    QCOMPARE(t->plot()->xAxis->range().lower, 0.0);
    QCOMPARE(t->plot()->xAxis->range().upper, 1.0);
  }
  QCOMPARE(tn[1]->plottedMaximum(), static_cast<double>(uniform_->peak_bytes));
  // Overlaid on one plot.
  v.setOverlay(true);
  QCOMPARE(v.overlayView()->lineCount(), 2);
  QCOMPARE(v.overlayView()->plottedMaximum(0), static_cast<double>(none_->peak_bytes));
  QCOMPARE(v.overlayView()->plottedMaximum(1), static_cast<double>(uniform_->peak_bytes));
  // Bars and the frontier scatter.
  QCOMPARE(v.peakChart()->barCount(), 2);
  QCOMPARE(v.timeChart()->barCount(), 2);
  QCOMPARE(v.scatter()->pointCount(), 2);
  QVERIFY(uniform_->peak_bytes < none_->peak_bytes);
}

namespace {

// A copy of `base` under `policy` with these figures: its peak and one counted step per time.
std::shared_ptr<Trace> with_figures(const Trace& base, const char* policy, std::uint64_t peak,
                                    std::vector<double> ms) {
  auto t = std::make_shared<Trace>(base);
  t->policy = policy;
  t->peak_bytes = peak;
  t->step_stats.clear();
  for (double m : ms) {
    StepStats s;
    s.time_ms = m;
    s.peak_bytes = peak;
    t->step_stats.push_back(s);
  }
  return t;
}

}  // namespace

void GuiViewsTest::compareFrontierIgnoresUncheckedAndCancelledRuns() {
  RunListModel list;
  list.add(with_figures(*none_, "none", 1000, {10, 10.2}), {});
  list.add(with_figures(*none_, "uniform", 600, {13, 13.1}), {});
  // Smaller and faster than both: it would push them off the frontier were it counted.
  auto cancelled = with_figures(*none_, "selective", 100, {1});
  cancelled->complete = false;
  cancelled->status = "cancelled";
  const int c = list.add(cancelled, {});
  QVERIFY(!list.isChecked(c));  // an incomplete run is not compared unasked
  QVERIFY(list.at(c).label.endsWith("(cancelled)"));
  QVERIFY(list.data(list.index(c), Qt::ToolTipRole).toString().contains("cancelled"));
  const int u = list.add(with_figures(*none_, "offload", 100, {1}), {});
  QVERIFY(list.isChecked(u));
  list.setChecked(u, false);
  CompareView v;
  v.resize(1200, 900);
  v.show();
  v.setRuns(list.checked());
  QCOMPARE(v.groupCount(), 1);
  QCOMPARE(v.scatter()->pointCount(), 2);
  QCOMPARE(v.scatter()->frontierCount(), 2);
  QCOMPARE(v.timeChart()->barCount(), 2);
  // Checked by hand, the cancelled run shows its timeline but enters no chart.
  list.setChecked(c, true);
  v.setRuns(list.checked());
  QCOMPARE(v.timelines().size(), 3);
  QCOMPARE(v.timelineGroups().last(), -1);
  QCOMPARE(v.peakChart()->barCount(), 2);
  QCOMPARE(v.scatter()->frontierCount(), 2);
}

// The budget policy's line for the runs' model, from its smallest budget to none's activation
// peak (where none's run sits, at no recomputation), with the runs as points; none without the
// plugins.
void GuiViewsTest::compareDrawsTheBudgetLineWithTheRuns() {
  RunListModel list;
  list.add(none_, {});
  list.add(uniform_, {});
  CompareView v;
  v.resize(1400, 900);
  v.show();
  v.setRuns(list.checked());
  QCOMPARE(v.budgetFrontier()->linePoints(), 0);  // no plugins: no line
  v.setRegistry(&testing::registry());
  v.setRuns(list.checked());
  BudgetFrontierChart* c = v.budgetFrontier();
  QCOMPARE(c->linePoints(), 24);
  QCOMPARE(c->runPoints(), 2);
  const Frontier f = compute_frontier(testing::registry(), none_->model, "optimal", 24);
  const Frontier fb = compute_frontier(testing::registry(), none_->model, "budget", 24);
  QVERIFY(f.smallest_budget < fb.smallest_budget);  // optimal reaches lower
  QCOMPARE(f.store_all_budget, none_->activation_peak_bytes);  // the plan's walk is the run's
  QVERIFY(f.line.front().recompute_flops > 0);
  QCOMPARE(f.line.back().recompute_flops, std::uint64_t{0});
  // The line as drawn is the frontier's: each budget at its recompute GFLOP.
  for (int i = 0; i < c->linePoints(); ++i) {
    QCOMPARE(c->linePoint(i).x(), static_cast<double>(f.line[static_cast<std::size_t>(i)].budget));
    QCOMPARE(c->linePoint(i).y(), static_cast<double>(f.line[static_cast<std::size_t>(i)].recompute_flops) / 1e9);
  }
  // none's point: at the line's right end, on the axis of no recomputation.
  QTest::qWait(50);
  const QPointF p = c->runPixel(0);
  QCOMPARE(p.x(), c->plot()->xAxis->coordToPixel(static_cast<double>(f.store_all_budget)));
  QCOMPARE(p.y(), c->plot()->yAxis->coordToPixel(0.0));
  QVERIFY(c->runPixel(1).y() < p.y());  // uniform recomputes: higher up
}

void GuiViewsTest::compareGroupsUnlikeRunsWithTheirOwnScales() {
  // Another shape of the model: four times the batch, four times the bytes.
  auto big = std::make_shared<Trace>(*none_);
  big->model.batch *= 4;
  for (auto& e : big->events) e.delta *= 4;
  big->peak_bytes *= 4;
  for (auto& s : big->step_stats) s.peak_bytes *= 4;
  RunListModel list;
  list.add(big, {});
  list.add(none_, {});
  list.add(uniform_, {});
  CompareView v;
  v.resize(1200, 1000);
  v.show();
  v.setRuns(list.checked());
  QApplication::processEvents();  // the charts laid out at their size
  QCOMPARE(v.groupCount(), 2);
  QVERIFY2(v.banner().startsWith("2 groups: "), qPrintable(v.banner()));
  QVERIFY(v.banner().contains("(1 run)"));
  QVERIFY(v.banner().contains("(2 runs)"));
  QVERIFY(v.banner().contains("each has its own scales and frontier"));
  QCOMPARE(v.timelineGroups(), (QList<int>{0, 1, 1}));
  const auto tl = v.timelines();
  // Each group's byte scale is its own: the small runs are not squashed under the big one.
  const double big_top = tl[0]->plot()->yAxis->range().upper, small_top = tl[1]->plot()->yAxis->range().upper;
  QCOMPARE(tl[2]->plot()->yAxis->range().upper, small_top);
  QVERIFY(big_top >= static_cast<double>(big->peak_bytes));
  QVERIFY(small_top >= static_cast<double>(none_->peak_bytes));
  QVERIFY(small_top < static_cast<double>(big->peak_bytes));
  const double big_bar = v.peakChart(0)->plot()->yAxis->range().upper,
               small_bar = v.peakChart(1)->plot()->yAxis->range().upper;
  QVERIFY(big_bar >= static_cast<double>(big->peak_bytes));
  QVERIFY(small_bar >= static_cast<double>(none_->peak_bytes));
  QVERIFY2(small_bar < static_cast<double>(big->peak_bytes),
           qPrintable(QString("%1 %2 %3 rect %4x%5 vertical %6").arg(small_bar).arg(none_->peak_bytes).arg(big->peak_bytes)
           .arg(v.peakChart(1)->plot()->axisRect()->width()).arg(v.peakChart(1)->plot()->axisRect()->height()).arg(v.peakChart(1)->labelsVertical())));
  QCOMPARE(v.peakChart(0)->barCount(), 1);
  QCOMPARE(v.peakChart(1)->barCount(), 2);
  QCOMPARE(v.scatter(0)->pointCount(), 1);
  QCOMPARE(v.scatter(1)->pointCount(), 2);
  QVERIFY(v.scatter(1)->plot()->yAxis->range().upper < static_cast<double>(big->peak_bytes));
  // The big run's none is no baseline of the small group: there the small none is.
  QCOMPARE(v.peakChart(1)->bar(0).note, QString("baseline"));
  // Zooming one group's timeline leaves the other group's alone.
  const QCPRange r0 = tl[0]->plot()->xAxis->range();
  tl[1]->plot()->xAxis->setRange(tl[1]->plot()->xAxis->range().upper * 0.25, tl[1]->plot()->xAxis->range().upper * 0.5);
  QCOMPARE(tl[2]->plot()->xAxis->range().lower, tl[1]->plot()->xAxis->range().lower);
  QCOMPARE(tl[0]->plot()->xAxis->range().lower, r0.lower);
  QCOMPARE(tl[0]->plot()->xAxis->range().upper, r0.upper);
  // One group: no banner.
  list.setChecked(0, false);
  v.setRuns(list.checked());
  QCOMPARE(v.groupCount(), 1);
  QCOMPARE(v.banner(), QString());
}

void GuiViewsTest::compareMarksOverheadsWithinNoise() {
  RunListModel list;
  list.add(with_figures(*none_, "none", 1000, {10, 12}), {});
  list.add(with_figures(*none_, "uniform", 600, {9.2, 13.1}), {});     // +1.4 %, 4 ms apart: noise
  list.add(with_figures(*none_, "selective", 800, {17.3, 17.5}), {});  // +58 %, steady: measured
  for (const char* p : {"revolve", "offload", "budget"}) list.add(with_figures(*none_, p, 700, {28.31, 28.32}), {});
  CompareView v;
  v.resize(700, 900);  // narrow: the value labels cannot stand side by side
  v.show();
  v.setRuns(list.checked());
  RunBarChart* t = v.timeChart();
  QCOMPARE(t->barCount(), 6);
  QCOMPARE(t->bar(0).note, QString("baseline"));
  QVERIFY(t->bar(1).hatched);
  QCOMPARE(t->bar(1).note, QString("within noise"));
  QCOMPARE(t->bar(1).value, 11.15);
  QCOMPARE(t->bar(1).low, 9.2);
  QCOMPARE(t->bar(1).high, 13.1);
  QVERIFY(!t->bar(2).hatched);
  QCOMPARE(t->bar(2).note, human_percent(100.0 * (17.4 / 11.0 - 1.0)));
  // No value label overlaps another or leaves the plot, at this width and a wide one.
  for (int width : {700, 1800}) {
    v.resize(width, 900);
    QApplication::processEvents();
    for (RunBarChart* c : {v.peakChart(), v.timeChart()}) {
      c->plot()->replot(QCustomPlot::rpImmediateRefresh);
      const QRectF area = QRectF(c->plot()->axisRect()->rect()).adjusted(-1, -1, 1, 1);
      for (int i = 0; i < c->barCount(); ++i) {
        const QRectF r = c->labelRect(i);
        QVERIFY2(area.contains(r), qPrintable(QString("label %1 at %2 px wide cut: %3,%4 %5x%6 outside %7,%8 %9x%10")
                                                  .arg(i).arg(width).arg(r.x()).arg(r.y()).arg(r.width()).arg(r.height())
                                                  .arg(area.x()).arg(area.y()).arg(area.width()).arg(area.height())));
        for (int j = i + 1; j < c->barCount(); ++j)
          QVERIFY2(!r.intersects(c->labelRect(j)), qPrintable(QString("labels %1, %2 overlap").arg(i).arg(j)));
      }
    }
    // The scatter's run names too, placed again for the new size.
    FrontierScatter* s = v.scatter();
    const QRectF area = QRectF(s->plot()->axisRect()->rect()).adjusted(-1, -1, 1, 1);
    for (int i = 0; i < s->pointCount(); ++i)
      QVERIFY2(area.contains(s->nameRect(i)), qPrintable(QString("name %1 at %2 px wide cut").arg(i).arg(width)));
  }
}

// Two runs close on the scatter (the second a few pixels right of and above the first): the
// first's name goes where it covers no other point (its first choice, right and above, covered
// the second run's point); and the page needs no horizontal scroll.
void GuiViewsTest::scatterNamesLeaveTheOtherPointsFree() {
  {
    // Two runs, the Compare page as wide as the window gives it at 1280x800.
    RunListModel two;
    two.add(with_figures(*none_, "none", 1000000, {10}), {});
    two.add(with_figures(*none_, "uniform", 800000, {12}), {});
    CompareView c;
    c.resize(890, 720);
    c.show();
    c.setRuns(two.checked());
    QTest::qWait(50);
    for (QScrollArea* a : c.findChildren<QScrollArea*>())
      QVERIFY2(a->widget()->width() <= a->viewport()->width(),
               qPrintable(QString("two runs: %1 in %2").arg(a->widget()->width()).arg(a->viewport()->width())));
  }
  RunListModel list;
  list.add(with_figures(*none_, "none", 1000000, {10}), {});
  list.add(with_figures(*none_, "uniform", 1050000, {10.5}), {});
  list.add(with_figures(*none_, "selective", 2000000, {20}), {});
  list.add(with_figures(*none_, "revolve", 1500000, {16}), {});
  CompareView v;
  for (int width : {900, 1280, 1800}) {
    v.resize(width, 800);
    v.show();
    v.setRuns(list.checked());
    QApplication::processEvents();
    // The page fits its width: no chart needs a horizontal scroll (at 1280x800 the window gives
    // it about 900 px).
    QTest::qWait(50);
    for (QScrollArea* a : v.findChildren<QScrollArea*>())
      QVERIFY2(!a->horizontalScrollBar()->isVisible() && a->widget()->width() <= a->viewport()->width(),
               qPrintable(QString("a horizontal scroll at %1 px: %2 in %3").arg(width).arg(a->widget()->width())
                              .arg(a->viewport()->width())));
    FrontierScatter* s = v.scatter();
    QCOMPARE(s->pointCount(), 4);
    for (int i = 0; i < s->pointCount(); ++i)
      for (int j = 0; j < s->pointCount(); ++j) {
        if (i == j) continue;
        const QPointF p = s->pointPixel(j);
        QVERIFY2(!s->nameRect(i).intersects(QRectF(p - QPointF(3, 3), QSizeF(6, 6))),
                 qPrintable(QString("at %1 px: run %2's name covers run %3's point").arg(width).arg(i).arg(j)));
      }
  }
}

void GuiViewsTest::colorsFollowThePolicyNotThePosition() {
  auto swatch_color = [](const RunListModel& l, int row) {
    return l.data(l.index(row), Qt::DecorationRole).value<QPixmap>().toImage().pixelColor(6, 6);
  };
  QColor uniform_bar, uniform_swatch, uniform_line;
  for (bool uniform_first : {true, false}) {
    RunListModel list;
    if (uniform_first) list.add(uniform_, {});
    list.add(none_, {});
    list.add(with_figures(*none_, "selective", none_->peak_bytes, {1}), {});
    if (!uniform_first) list.add(uniform_, {});
    const int row = uniform_first ? 0 : 2;
    CompareView v;
    v.resize(1200, 900);
    v.show();
    v.setRuns(list.checked());
    v.setOverlay(true);
    const QColor bar = v.timeChart()->bar(row).color, sw = swatch_color(list, row),
                 line = v.overlayView()->plot()->graph(row)->pen().color();
    QCOMPARE(bar, policy_color("uniform"));
    QCOMPARE(line, bar);
    QCOMPARE(sw, bar);
    if (uniform_first) {
      uniform_bar = bar;
      uniform_swatch = sw;
      uniform_line = line;
    } else {
      QCOMPARE(bar, uniform_bar);
      QCOMPARE(sw, uniform_swatch);
      QCOMPARE(line, uniform_line);
    }
  }
  // Every policy family its own color; a plugin's is the same each time it is asked.
  QList<QRgb> seen;
  for (const char* p : {"none", "selective", "uniform", "revolve", "offload", "budget"}) {
    QVERIFY(!seen.contains(policy_color(p).rgb()));
    seen << policy_color(p).rgb();
  }
  QCOMPARE(policy_color("my_plugin"), policy_color("my_plugin"));
}

void GuiViewsTest::exportWritesFilesThatReadBack() {
  const QString dir = tmp_.filePath("export");
  const QStringList files = export_csv_tables(*none_, dir);
  const auto rows = csv_table_rows(*none_);
  QCOMPARE(files.size(), static_cast<int>(csv_table_files().size()));
  for (int i = 0; i < files.size(); ++i) {
    csv::Reader r(files[i].toStdString());
    while (r.next()) {
    }
    QCOMPARE(r.rows(), rows[static_cast<std::size_t>(i)]);
  }
  // The Chrome trace parses and holds every op.
  const QString chrome = tmp_.filePath("trace.json");
  export_chrome_trace(*none_, chrome);
  QFile cf(chrome);
  QVERIFY(cf.open(QIODevice::ReadOnly));
  const auto j = nlohmann::json::parse(cf.readAll().toStdString());
  std::size_t complete = 0;
  for (const auto& e : j.at("traceEvents"))
    if (e.value("ph", "") == "X") ++complete;
  QVERIFY(complete >= none_->ops.size());
  // A whole run directory reads back to the same run.
  const QString run = tmp_.filePath("run");
  save_run_dir(*none_, run, false);
  const Trace back = read_run_dir(run.toStdString());
  QCOMPARE(back.peak_bytes, none_->peak_bytes);
  QCOMPARE(back.events.size(), none_->events.size());
  QCOMPARE(back.ledger.size(), none_->ledger.size());
  QVERIFY_THROWS_EXCEPTION(remat::Error, save_run_dir(*none_, run, false));  // never overwritten unasked
  // Plots as PNG and PDF, and nothing left under a temporary name.
  RunView view;
  view.resize(1200, 800);
  view.show();
  view.setTrace(none_, "none");
  QVERIFY(testing::wait_loaded(view));
  const QString png = tmp_.filePath("plots/memory.png"), pdf = tmp_.filePath("plots/memory.pdf");
  QDir().mkpath(tmp_.filePath("plots"));
  export_plot(view.memory()->plot(), png, 800, 400);
  export_plot(view.ops()->plot(), pdf);
  QImage img(png);
  QVERIFY(!img.isNull());
  QCOMPARE(img.width(), 1600);  // 2x for a sharp image
  QFile pf(pdf);
  QVERIFY(pf.open(QIODevice::ReadOnly));
  QVERIFY(pf.read(5) == "%PDF-");
  QCOMPARE(QDir(tmp_.filePath("plots")).entryList(QDir::Files | QDir::Hidden).size(), 2);
  QVERIFY_THROWS_EXCEPTION(remat::Error, export_plot(view.memory()->plot(), tmp_.filePath("plots/x.gif")));
}

void GuiViewsTest::clickOnTheTimelineSelectsLedgerRows() {
  RunView view;
  view.resize(1200, 800);
  view.show();
  view.setTrace(none_, "none");
  QVERIFY(testing::wait_loaded(view));
  LedgerView ledger;
  ledger.setTrace(none_);
  QCOMPARE(ledger.model()->rowCount(), static_cast<int>(none_->ledger.size()));
  MemoryTimelineView* m = view.memory();
  QSignalSpy picked(m, &MemoryTimelineView::tensorsPicked);
  connect(m, &MemoryTimelineView::tensorsPicked, &ledger, &LedgerView::selectTensors);
  // Click on the peak: the largest tensors alive there are block activations.
  const MemoryTimeline tl = memory_timeline(*none_);
  const double key = static_cast<double>(tl.points[tl.peak_point].t_ns - m->origin());
  const auto tensors = m->tensorsAt(key, 8);
  QVERIFY(!tensors.isEmpty());
  QVERIFY(m->describeAt(key).contains("largest alive"));
  m->plot()->replot();
  const QPoint at(static_cast<int>(m->plot()->xAxis->coordToPixel(key)) + 1, m->plot()->axisRect()->center().y());
  QTest::mouseClick(m->plot(), Qt::LeftButton, {}, at);
  QCOMPARE(picked.count(), 1);
  const int selected = ledger.table()->selectionModel()->selectedRows().size();
  QVERIFY2(selected > 0, "the tensors alive at the peak are selected in the ledger");
  // Filtering and sorting.
  ledger.setFilter("attn.probs");
  QCOMPARE(ledger.proxy()->rowCount(), none_->model.layers);
  ledger.setFilter({});
  ledger.table()->sortByColumn(LedgerModel::Bytes, Qt::DescendingOrder);
  const auto first = ledger.proxy()->index(0, LedgerModel::Bytes).data(Qt::UserRole).toULongLong();
  for (const auto& e : none_->ledger) QVERIFY(e.bytes <= first);
}

void GuiViewsTest::analysisShowsTheFormulaNextToTheMeasuredBytes() {
  RunListModel list;
  list.add(none_, {});
  list.add(uniform_, {});
  AnalysisView v;
  v.setCurrent(list.at(0));
  v.setRuns(list.runs());
  const BlockFormula f = block_formula(none_->model);
  QVERIFY(f.closed_form);  // tiny: GPT-2, dropout, naive attention, bf16
  const std::uint64_t s = 64, b = 4, h = 128, a = 4;
  QCOMPARE(f.closed_form_bytes, 34 * s * b * h + 5 * a * s * s * b);
  QCOMPARE(f.total, f.closed_form_bytes);
  QCOMPARE(v.blockTable()->rowCount(), none_->model.layers);
  for (int r = 0; r < v.blockTable()->rowCount(); ++r) {
    QCOMPARE(none_->saved_bytes_per_block[static_cast<std::size_t>(r)], f.closed_form_bytes);
    QCOMPARE(v.blockTable()->item(r, 4)->text(), QString("0"));  // measured − formula
  }
  QCOMPARE(v.termTable()->rowCount(), static_cast<int>(f.terms.size()) + 1);
  QCOMPARE(v.predictionTable()->rowCount(), 2);
  QCOMPARE(v.predictionTable()->item(0, 3)->text(), QString("exact"));  // CPU: to the byte
}

void GuiViewsTest::opTimelineOfAMillionOpsZooms() {
  auto t = std::make_shared<Trace>(*none_);
  t->ops.clear();
  const int n = 1000000;
  t->ops.reserve(n);
  for (int i = 0; i < n; ++i) {
    OpRecord o;
    o.start_ns = t->step_start_ns + static_cast<std::int64_t>(i) * 100;
    o.end_ns = o.start_ns + 80;
    o.phase = i < n / 2 ? Phase::Forward : Phase::Backward;
    o.name = "op";
    t->ops.push_back(std::move(o));
  }
  OpTimelineView v;
  v.resize(1400, 200);
  v.show();
  const std::int64_t origin = t->step_start_ns, duration = static_cast<std::int64_t>(n) * 100;
  v.setTrace(t, origin, duration);
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  // Merged to at most a few bars per pixel column, but every part of the step covered.
  QVERIFY(v.drawnBars() > 0);
  QVERIFY(v.drawnBars() <= static_cast<std::size_t>(2 * v.plot()->axisRect()->width() + 2));
  v.plot()->xAxis->setRange(1000, 1000 + 100 * 50);  // 50 ops: each its own bar
  v.plot()->replot(QCustomPlot::rpImmediateRefresh);
  std::size_t op_bars = 0;
  const auto leaf = static_cast<std::size_t>(v.tree().leaf_track(Stream::Compute));
  for (const auto& b : v.bars()->lastBars()) op_bars += b.row == leaf && b.count == 1;
  QVERIFY(op_bars >= 50 && op_bars <= 52);
}

void GuiViewsTest::cudaRunsShowReservedBytesAndHostLine() {
  auto named = [](QCustomPlot* p, const QString& name) -> QCPGraph* {
    for (int i = 0; i < p->graphCount(); ++i)
      if (p->graph(i)->name() == name) return p->graph(i);
    return nullptr;
  };
  MemoryTimelineView v;
  v.resize(1200, 500);
  v.show();
  v.setTrace(none_, "cpu");
  QVERIFY(!named(v.plot(), "reserved"));  // the CPU has no caching allocator to show
  QVERIFY(!named(v.plot(), "host (offloaded)"));
  // The same events as a CUDA run whose caching allocator holds a quarter more than is live.
  auto t = std::make_shared<Trace>(*none_);
  t->device = "cuda";
  std::int64_t live = 0;
  std::uint64_t held = 0;
  for (auto& e : t->events) {
    if (e.space == Space::Device) live += e.delta;
    held = std::max(held, static_cast<std::uint64_t>(live) * 5 / 4);
    e.reserved = held;
  }
  v.setTrace(t, "cuda");
  QCPGraph* reserved = named(v.plot(), "reserved");
  QVERIFY(reserved);
  double top = 0;
  for (auto it = reserved->data()->constBegin(); it != reserved->data()->constEnd(); ++it) top = std::max(top, it->value);
  QCOMPARE(top, static_cast<double>(held));
  QCOMPARE(v.plottedMaximum(), static_cast<double>(none_->peak_bytes));
  QVERIFY(v.plot()->yAxis->range().upper >= static_cast<double>(held));
  // An offloading run draws its host bytes as their own line, outside the device stack.
  auto off = testing::train("tiny", "offload");
  QVERIFY(off->complete);
  v.setTrace(off, "offload");
  QVERIFY(named(v.plot(), "host (offloaded)"));
  QCOMPARE(v.plottedMaximum(), static_cast<double>(off->peak_bytes));
}

// tiny under offload on an H200 (rematlab-batch run --device cuda --steps 2), without the
// derived trace.json and memory_timeline.csv: kernels on three streams, reserved bytes.
void GuiViewsTest::aRecordedH200RunOpens() {
  const auto t = std::make_shared<const Trace>(read_run_dir((remat::gui::testing::gui_test_data() + "/cuda-tiny-offload").toStdString()));
  QCOMPARE(QString::fromStdString(t->device), QString("cuda"));
  RunView view;
  view.resize(1400, 900);
  view.show();
  view.setTrace(t, "h200");
  QVERIFY(testing::wait_loaded(view));
  MemoryTimelineView* m = view.memory();
  QCOMPARE(m->plottedMaximum(), static_cast<double>(t->peak_bytes));
  bool reserved = false, host = false;
  for (int i = 0; i < m->plot()->graphCount(); ++i) {
    reserved = reserved || m->plot()->graph(i)->name() == "reserved";
    host = host || m->plot()->graph(i)->name() == "host (offloaded)";
  }
  QVERIFY(reserved);
  QVERIFY(host);
  auto* ticker = dynamic_cast<QCPAxisTickerText*>(view.ops()->plot()->yAxis->ticker().data());
  QVERIFY(ticker);
  QCOMPARE(ticker->ticks().size(), 7);  // step, phase, block, op, kernel; to host, to device
  view.ops()->plot()->replot(QCustomPlot::rpImmediateRefresh);
  QVERIFY(view.ops()->drawnBars() > 0);
}

void GuiViewsTest::compareSetsARankOnlyAgainstRunsOfItsLayout() {
  // A tensor-parallel rank holds half the memory of one process: set against it, it would read
  // as a reduction no policy made.
  auto rank = std::make_shared<Trace>(*none_);
  rank->provenance = {{"tp_world_size", "2"}, {"tp_rank", "0"}, {"sp", "1"}};
  rank->peak_bytes /= 2;
  auto stage = std::make_shared<Trace>(*none_);
  stage->provenance = {{"pp_world_size", "2"}, {"pp_rank", "1"}, {"stage_blocks", "2"}};
  RunListModel list;
  list.add(none_, {});
  list.add(uniform_, {});
  list.add(rank, {});
  list.add(stage, {});
  CompareView v;
  v.resize(1280, 800);
  v.show();
  v.setRuns(list.checked());
  QApplication::processEvents();
  // One group of single processes, one per layout.
  QCOMPARE(v.groupCount(), 3);
  QCOMPARE(v.peakChart(0)->barCount(), 2);
  for (int g = 1; g < 3; ++g) {
    RunBarChart* c = v.peakChart(g);
    QCOMPARE(c->barCount(), 1);
    QVERIFY2(!c->bar(0).note.contains(QChar(0x2212)), qPrintable(c->bar(0).note));  // no "−47.7 %"
    QVERIFY2(c->bar(0).label.contains("rank"), qPrintable(c->bar(0).label));
  }
  QVERIFY2(v.banner().contains("tp 2 sp") && v.banner().contains("pp 2"), qPrintable(v.banner()));
}

void GuiViewsTest::anImportedTraceIsNotComparedUnaskedAndIsNamedByItsFile() {
  const QString snapshot = testing::gui_test_data() + "/../../data/torch/snapshot-torch2.pickle";
  const auto snap = read_run_or_import(snapshot);
  RunListModel list;
  const int row = list.add(snap, {});
  QVERIFY(!list.isChecked(row));  // not compared on arrival
  list.add(none_, {});
  list.setChecked(row, true);
  CompareView v;
  v.resize(1280, 800);
  v.show();
  v.setRuns(list.checked());
  QApplication::processEvents();
  QCOMPARE(v.groupCount(), 2);
  // Its heading names its file, not a model it never had.
  QVERIFY2(v.banner().contains("snapshot-torch2.pickle (pytorch-snapshot)"), qPrintable(v.banner()));
  QVERIFY2(!v.banner().contains(QString(" s%1 b%2 ").arg(snap->model.seq).arg(snap->model.batch)), qPrintable(v.banner()));
}

QTEST_MAIN(GuiViewsTest)
#include "gui_views_test.moc"
