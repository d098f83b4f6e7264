// The Diff page on real runs of tiny, offscreen: `none` against full recomputation (uniform, one
// block per segment) matches every op of none and adds the recompute ops in B's lane, colored as
// added, with the table listing every row side by side (or only the changes) and the line over
// it summing them; A follows the user's choice while that run is in the list and B the current
// run; runs of different models are refused with what differs and nothing drawn.
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QSignalSpy>
#include <QTableView>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_test_util.h"
#include "views/diff_view.h"
#include "views/span_plottable.h"

using namespace remat;
using namespace remat::gui;

class GuiDiffTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    testing::isolate_settings();
    none_ = testing::train("tiny", "none");
    uniform_ = testing::train("tiny", "uniform:segments=4");
    small_ = testing::train("small", "none");
  }
  void recomputationIsWhatBAdds();
  void aStaysAndBFollowsTheCurrentRun();
  void unlikeRunsAreRefusedWithWhatDiffers();

 private:
  static std::vector<RunEntry> entries(const std::vector<std::shared_ptr<const Trace>>& ts) {
    std::vector<RunEntry> out;
    for (const auto& t : ts) {
      RunEntry e;
      e.trace = t;
      e.id = static_cast<int>(out.size()) + 1;
      e.label = QString("#%1 %2 · %3").arg(e.id).arg(QString::fromStdString(t->model.name), QString::fromStdString(t->policy));
      out.push_back(e);
    }
    return out;
  }
  static bool waitShown(DiffView& v) {
    QElapsedTimer t;
    t.start();
    while (v.busy() && t.elapsed() < 60000) QTest::qWait(5);
    return !v.busy();
  }
  std::shared_ptr<const Trace> none_, uniform_, small_;
};

void GuiDiffTest::recomputationIsWhatBAdds() {
  DiffView v;
  v.resize(1280, 700);
  v.show();
  v.setRuns(entries({none_, uniform_}), 1);
  QVERIFY(waitShown(v));
  QCOMPARE(v.runA()->currentIndex(), 0);
  QCOMPARE(v.runB()->currentIndex(), 1);
  const auto d = v.result();
  QVERIFY(d);
  QVERIFY(d->added > 0);
  QCOMPARE(d->removed, 0u);
  const PhaseDiff& rec = d->phases[static_cast<std::size_t>(Phase::Recompute)];
  QCOMPARE(rec.added, d->added);  // all B added is recomputation
  QVERIFY2(v.summary()->text().contains(QString("recompute: +%1 ops").arg(rec.added)), qPrintable(v.summary()->text()));
  // The lanes: A's compute ops in the first row, B's in the second, B's added ones colored so.
  std::size_t a_ops = 0, b_ops = 0;
  for (const auto& o : none_->ops) a_ops += o.stream == Stream::Compute && o.step == none_->ops.back().step;
  for (const auto& o : uniform_->ops) b_ops += o.stream == Stream::Compute && o.step == uniform_->ops.back().step;
  const SpanRows* rows = v.lanes()->bars()->rows();
  QCOMPARE(rows->rows(), std::size_t{2});
  QVERIFY(v.lanes()->isVisible() && v.lanes()->height() >= 100);
  QVERIFY(v.table()->isVisible());
  v.grab().save("/tmp/diffview.png");
  QCOMPARE(rows->row(0).size(), a_ops);
  QCOMPARE(rows->row(1).size(), b_ops);
  std::size_t added = 0;
  for (const Span& s : rows->row(1)) {
    const DiffRow& r = d->rows[s.index];
    QCOMPARE(s.color, static_cast<std::uint8_t>(r.status));
    added += r.status == DiffStatus::Added;
  }
  QCOMPARE(added, static_cast<std::size_t>(d->added));
  for (const Span& s : rows->row(0)) QCOMPARE(d->rows[s.index].status, DiffStatus::Matched);
  // The table: every row, A's and B's times side by side; or only the changes.
  QCOMPARE(v.model()->rowCount(), static_cast<int>(d->rows.size()));
  int first_added = -1;
  for (int r = 0; r < v.model()->rowCount() && first_added < 0; ++r)
    if (v.model()->diffRow(r).status == DiffStatus::Added) first_added = r;
  QVERIFY(first_added >= 0);
  QCOMPARE(v.model()->index(first_added, DiffTableModel::Status).data().toString(), QString("added"));
  QCOMPARE(v.model()->index(first_added, DiffTableModel::AStart).data().toString(), QString("–"));
  QVERIFY(v.model()->index(first_added, DiffTableModel::BTime).data().toString() != "–");
  v.changesOnly()->setChecked(true);
  QVERIFY(v.model()->rowCount() >= static_cast<int>(d->added));
  QVERIFY(v.model()->rowCount() < static_cast<int>(d->rows.size()));
  for (int r = 0; r < v.model()->rowCount(); ++r) {
    const DiffRow& x = v.model()->diffRow(r);
    QVERIFY(x.status != DiffStatus::Matched || std::llabs(x.delta_ns()) >= 1000);
  }
}

void GuiDiffTest::aStaysAndBFollowsTheCurrentRun() {
  DiffView v;
  v.show();
  const auto three = entries({none_, uniform_, none_});
  v.setRuns(three, 1);
  QVERIFY(waitShown(v));
  // The user makes the third run A.
  v.diff(2, 1);
  QVERIFY(waitShown(v));
  QCOMPARE(v.runA()->currentIndex(), 2);
  // Another run becomes the current one: B follows, A stays.
  v.setRuns(three, 0);
  QVERIFY(waitShown(v));
  QCOMPARE(v.runA()->currentIndex(), 2);
  QCOMPARE(v.runB()->currentIndex(), 0);
  QVERIFY(v.result());
  QCOMPARE(v.result()->added, 0u);
  QCOMPARE(v.result()->removed, 0u);
  // The same two again: not diffed anew.
  QSignalSpy shown(&v, &DiffView::diffShown);
  v.setRuns(three, 0);
  QVERIFY(!v.busy());
  QCOMPARE(shown.count(), 0);
  // A run alone: nothing to diff.
  v.setRuns(entries({none_}), 0);
  QVERIFY(waitShown(v));
  QVERIFY(!v.result());
  QCOMPARE(v.model()->rowCount(), 0);
}

void GuiDiffTest::unlikeRunsAreRefusedWithWhatDiffers() {
  DiffView v;
  v.show();
  v.setRuns(entries({none_, small_}), 1);
  QVERIFY(waitShown(v));
  QVERIFY(!v.result());
  QVERIFY2(v.summary()->text().contains("model"), qPrintable(v.summary()->text()));
  QVERIFY(!v.lanes()->isVisible() && !v.table()->isVisible());
  QCOMPARE(v.model()->rowCount(), 0);
  // Then two like runs: drawn again.
  v.setRuns(entries({none_, uniform_}), 1);
  QVERIFY(waitShown(v));
  QVERIFY(v.result());
  QVERIFY(v.lanes()->isVisible() && v.table()->isVisible());
}

QTEST_MAIN(GuiDiffTest)
#include "gui_diff_test.moc"
