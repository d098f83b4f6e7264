// A run of several ranks in the window (tests/data/ranks-v3: tiny, --tp 2 --sp): the Ranks page
// with its picker, the peak of each rank as bars (measured and predicted, the ranks' own
// figures), the ranks' op timelines stacked with each rank's collectives on their own row and
// drawn; the run list labels each rank with its layout and checks only the peak rank for
// Compare; picking a rank shows its run view, whose op timeline has a comm track.
#include <QComboBox>
#include <QSignalSpy>
#include <QTest>
#include <qcustomplot.h>

#include "core/analysis/rank_lanes.h"
#include "core/trace/run_dir.h"
#include "gui_test_util.h"
#include "views/op_timeline_view.h"
#include "views/ranks_peak_chart.h"
#include "views/ranks_timeline_view.h"
#include "views/ranks_view.h"
#include "views/span_plottable.h"

using namespace remat;
using namespace remat::gui;

namespace {
const QString kRanksDir = remat::gui::testing::gui_test_data() + "/../../data/ranks-v3";
}  // namespace

class GuiRanksViewTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    testing::isolate_settings();
    QVERIFY(tmp_.isValid());
  }
  void theRanksPageShowsEveryRank();
  void pickingARankShowsItsRun();

 private:
  QTemporaryDir tmp_;
};

void GuiRanksViewTest::theRanksPageShowsEveryRank() {
  MainWindow w(testing::window_options(tmp_, false, false));
  w.resize(1280, 800);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.openRunDir(kRanksDir);
  QVERIFY(QTest::qWaitFor([&] { return w.runs()->rowCount() == 2 && w.pendingReads() == 0; }, 60000));
  RanksView* v = w.ranksView();
  QVERIFY(w.pages()->isTabVisible(w.pages()->indexOf(v)));
  QCOMPARE(w.pages()->currentWidget(), v);
  QVERIFY2(v->title().contains("2 ranks (tp 2 sp)"), qPrintable(v->title()));
  QCOMPARE(v->picker()->count(), 3);  // all ranks, rank 0, rank 1
  QVERIFY(v->picker()->itemText(2).startsWith("rank 1 (tp rank 1, dp rank 0)"));

  // The bars are the ranks' own peaks.
  const RanksDir r = read_ranks_json(kRanksDir.toStdString());
  QCPBars* m = v->peaks()->measuredBars();
  QVERIFY(m && v->peaks()->predictedBars());
  QCOMPARE(m->data()->size(), 2);
  for (int k = 0; k < 2; ++k) {
    QCOMPARE(m->data()->at(k)->value, static_cast<double>(r.ranks[static_cast<std::size_t>(k)].peak_bytes));
    QCOMPARE(v->peaks()->predictedBars()->data()->at(k)->value,
             static_cast<double>(r.ranks[static_cast<std::size_t>(k)].predicted_peak_bytes));
  }

  // Two rows per rank; the comm rows hold exactly the rank's collectives.
  const RankLanes& l = v->timelines()->lanes();
  QCOMPARE(l.rows.rows(), std::size_t{4});
  for (int rank = 0; rank < 2; ++rank) {
    const Trace t = read_run_dir((kRanksDir + "/rank-" + QString::number(rank)).toStdString());
    std::size_t comm = 0;
    for (const auto& o : t.ops) comm += o.stream == Stream::Comm;
    QVERIFY(comm > 0);
    QCOMPARE(l.lanes[static_cast<std::size_t>(2 * rank + 1)].stream, Stream::Comm);
    QCOMPARE(l.rows.row(static_cast<std::size_t>(2 * rank + 1)).size(), comm);
    QCOMPARE(l.rows.row(static_cast<std::size_t>(2 * rank)).size(), t.ops.size() - comm);
  }
  // ... and they are drawn: bars on both comm rows.
  v->timelines()->plot()->replot(QCustomPlot::rpImmediateRefresh);
  bool drawn[4] = {};
  for (const auto& b : v->timelines()->bars()->lastBars()) drawn[b.row] = true;
  for (int row = 0; row < 4; ++row) QVERIFY2(drawn[row], qPrintable(QString("row %1 has no bars").arg(row)));

  // The run list says each rank's layout; only the peak rank is compared.
  const int peak = peak_rank(r);
  for (int row = 0; row < 2; ++row) {
    const QString label = w.runs()->at(row).label;
    const int rank = label.endsWith("rank 1") ? 1 : 0;
    QVERIFY2(label.contains("tp 2 sp, rank " + QString::number(rank)), qPrintable(label));
    QCOMPARE(w.runs()->isChecked(row), rank == peak);
  }
  QCOMPARE(w.runs()->checked().size(), std::size_t{1});
}

void GuiRanksViewTest::pickingARankShowsItsRun() {
  MainWindow w(testing::window_options(tmp_, false, false));
  w.resize(1280, 800);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.openRunDir(kRanksDir);
  QVERIFY(QTest::qWaitFor([&] { return w.runs()->rowCount() == 2 && w.pendingReads() == 0; }, 60000));
  QComboBox* p = w.ranksView()->picker();
  p->setCurrentIndex(2);
  emit p->activated(2);  // as a user's choice
  QCOMPARE(w.pages()->currentWidget(), static_cast<QWidget*>(w.runView()));
  QVERIFY(testing::wait_loaded(*w.runView()));
  QVERIFY(w.runs()->at(w.currentRun()).dir.endsWith("rank-1"));
  // Its op timeline draws the collectives on their own track.
  const OpTimelineView* ops = w.runView()->ops();
  const int comm = ops->tree().leaf_track(Stream::Comm);
  QVERIFY(comm >= 0);
  QVERIFY(!ops->tree().tracks()[static_cast<std::size_t>(comm)].slices.empty());
  QCOMPARE(p->currentIndex(), 0);  // the Ranks page stays the view of all ranks
}

QTEST_MAIN(GuiRanksViewTest)
#include "gui_ranks_view_test.moc"
