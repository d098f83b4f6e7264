// A run of several ranks in the window (tests/data/ranks-v3: tiny, --tp 2 --sp): the Ranks page
// with its picker, the peak of each rank as bars (measured and predicted, the ranks' own
// figures), the ranks' op timelines stacked with each rank's collectives on their own row and
// drawn; the run list labels each rank with its layout and checks only the peak rank for
// Compare; picking a rank shows its run view, whose op timeline has a comm track. Exporting the
// Chrome trace of a rank writes every rank; a pipeline stage (a real pp 2 run of the CLI) names
// its blocks as the whole model does; each rank's memory lane reaches its peak on one scale, on
// the op lanes' time axis, and arrows join each collective to its partner on the other rank.
#include <QCheckBox>
#include <QComboBox>
#include <QFileInfo>
#include <QProcess>
#include <QStatusBar>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTest>
#include <set>
#include <qcustomplot.h>

#include "core/analysis/rank_lanes.h"
#include "core/trace/run_dir.h"
#include "core/util/error.h"
#include "gui_test_util.h"
#include "views/op_timeline_view.h"
#include "views/ranks_peak_chart.h"
#include "views/ranks_timeline_view.h"
#include "views/flow_plottable.h"
#include "views/ranks_memory_view.h"
#include "views/ranks_view.h"
#include "views/run_view.h"
#include "views/schedule_strip.h"
#include "views/span_plottable.h"

using namespace remat;
using namespace remat::gui;

namespace {
const QString kRanksDir = remat::gui::testing::gui_test_data() + "/../../data/ranks-v3";

// Opens `dir` in `w`; true once its `runs` ranks are in the list and no read is pending.
bool open_ranks(MainWindow& w, const QString& dir, int runs) {
  w.openRunDir(dir);
  return QTest::qWaitFor([&] { return w.runs()->rowCount() == runs && w.pendingReads() == 0; }, 60000);
}
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
  void exportingARankExportsEveryRank();
  void aPipelineStageNamesTheModelsBlocks();
  void memoryLanesAndFlowsLinkTheRanks();

 private:
  QTemporaryDir tmp_;
};

void GuiRanksViewTest::theRanksPageShowsEveryRank() {
  MainWindow w(testing::window_options(tmp_, false, false));
  w.resize(1280, 800);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  QVERIFY(open_ranks(w, kRanksDir, 2));
  RanksView* v = w.ranksView();
  QVERIFY(w.pages()->isTabVisible(w.pages()->indexOf(v)));
  QCOMPARE(w.pages()->currentWidget(), v);
  QVERIFY2(v->title().contains("2 ranks (tp 2 sp)"), qPrintable(v->title()));
  QCOMPARE(v->banner(), QString());  // both ranks are of this run
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
  QVERIFY(open_ranks(w, kRanksDir, 2));
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

// File › Export Chrome trace on a rank of a run of several writes every rank: a process each,
// named as the CLI names them, and flows between partner collectives; with a rank not read it
// is left out and said; a rank of another job refuses the export.
void GuiRanksViewTest::exportingARankExportsEveryRank() {
  auto processes = [](const QString& path, int* flows) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return QStringList{};
    QStringList names;
    *flows = 0;
    for (const QJsonValue& v : QJsonDocument::fromJson(f.readAll()).object()["traceEvents"].toArray()) {
      const QJsonObject e = v.toObject();
      if (e["ph"] == "M" && e["name"] == "process_name") names << e["args"].toObject()["name"].toString();
      if (e["ph"] == "s") ++*flows;
    }
    return names;
  };
  {
    MainWindow w(testing::window_options(tmp_, false, false));
    QVERIFY(open_ranks(w, kRanksDir, 2));
    w.showRun(1);
    const QString path = tmp_.filePath("ranks-trace.json");
    w.exportChromeTraceTo(path);
    int flows = 0;
    const QStringList names = processes(path, &flows);
    QCOMPARE(names.size(), 2);
    QVERIFY2(names[0].startsWith("rank 0") && names[1].startsWith("rank 1"), qPrintable(names.join(", ")));
    QVERIFY(flows > 0);
    QVERIFY2(w.statusBar()->currentMessage().contains("all 2 ranks"), qPrintable(w.statusBar()->currentMessage()));
  }
  // Rank 1 left nothing: rank 0 alone, and the message says which is missing.
  const QString copy = tmp_.filePath("ranks-copy");
  QVERIFY(QDir().mkpath(copy + "/rank-0"));
  for (const QString& f : QDir(kRanksDir + "/rank-0").entryList(QDir::Files))
    QVERIFY(QFile::copy(kRanksDir + "/rank-0/" + f, copy + "/rank-0/" + f));
  QVERIFY(QFile::copy(kRanksDir + "/ranks.json", copy + "/ranks.json"));
  {
    MainWindow w(testing::window_options(tmp_, false, false));
    QVERIFY(open_ranks(w, copy, 1));
    w.showRun(0);
    const QString path = tmp_.filePath("one-rank-trace.json");
    w.exportChromeTraceTo(path);
    int flows = 0;
    QCOMPARE(processes(path, &flows).size(), 1);
    QVERIFY2(w.statusBar()->currentMessage().contains("rank 1 of 2 is missing"),
             qPrintable(w.statusBar()->currentMessage()));
  }
  // Rank 1 of another run in its place: refused, nothing written.
  QVERIFY(QDir().mkpath(copy + "/rank-1"));
  for (const QString& f : QDir(kRanksDir + "/rank-0").entryList(QDir::Files))
    QVERIFY(QFile::copy(kRanksDir + "/rank-0/" + f, copy + "/rank-1/" + f));
  {
    MainWindow w(testing::window_options(tmp_, false, false));
    QVERIFY(open_ranks(w, copy, 2));
    w.showRun(0);
    const QString path = tmp_.filePath("mixed-trace.json");
    QString error;
    try {
      w.exportChromeTraceTo(path);
    } catch (const Error& e) {
      error = QString::fromStdString(e.what());
    }
    QVERIFY2(error.contains("rank-1"), qPrintable(error));
    QVERIFY(!QFileInfo::exists(path));
    // The Ranks page leaves it out of its charts and says so.
    RanksView* v = w.ranksView();
    QVERIFY2(v->banner().contains("rank-1/ is not rank 1"), qPrintable(v->banner()));
    QVERIFY(v->timelines()->lanes().rows.row(2).empty() && v->timelines()->lanes().rows.row(3).empty());
    QVERIFY(!v->timelines()->lanes().rows.row(0).empty());
    QVERIFY(!v->memory()->lane(1) && v->memory()->lane(0));
  }
}

// Stage 1 of a 2-stage pipeline of tiny (4 blocks) holds h2 and h3: its schedule strip has
// their rows and no others (each with its actions), its op timeline names and finds them.
void GuiRanksViewTest::aPipelineStageNamesTheModelsBlocks() {
  const QString out = tmp_.filePath("pp2");
  QProcess p;
  p.start(QString::fromUtf8(remat::test_paths::build_dir()) + "/bin/rematlab-batch",
          {"run", "--model", "tiny", "--pp", "2", "--policy", "none", "--steps", "1", "--warmup", "0", "--out", out});
  QVERIFY(p.waitForFinished(120000));
  QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
  auto stage = std::make_shared<const Trace>(read_run_dir((out + "/rank-1").toStdString()));
  QCOMPARE(stage->model.layers, 4);
  RunView v;
  v.resize(1280, 800);
  v.show();
  v.setTrace(stage, "stage 1");
  QVERIFY(testing::wait_loaded(v));
  const QStringList labels = v.schedule()->rowLabels();
  QCOMPARE(labels.mid(0, 2), (QStringList{"h2", "h3"}));
  QVERIFY2(!labels.contains("h0") && !labels.contains("h1"), qPrintable(labels.join(",")));
  const SpanRows* rows = v.schedule()->bars()->rows();
  QCOMPARE(rows->rows(), static_cast<std::size_t>(labels.size()));
  for (std::size_t r = 0; r < rows->rows(); ++r) QVERIFY2(!rows->row(r).empty(), qPrintable(labels[static_cast<int>(r)]));
  OpTimelineView* ops = v.ops();
  QVERIFY(ops->find("h3.") > 0);
  QCOMPARE(ops->find("h0."), 0);
  QCOMPARE(QString::fromStdString(stage->ops[ops->matchOp(0)].name).left(3), QString("h1."));  // as recorded
  std::set<std::string> blocks;
  const auto& tracks = ops->tree().tracks();
  for (std::size_t k = 0; k < tracks.size(); ++k)
    if (tracks[k].level == SliceLevel::Block && tracks[k].stream == Stream::Compute)
      for (std::size_t i = 0; i < tracks[k].slices.size(); ++i)
        blocks.insert(ops->tree().name(*stage, static_cast<int>(k), static_cast<int>(i)));
  QCOMPARE(blocks, (std::set<std::string>{"block 2", "block 3"}));
}

void GuiRanksViewTest::memoryLanesAndFlowsLinkTheRanks() {
  MainWindow w(testing::window_options(tmp_, false, false));
  w.resize(1280, 800);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  QVERIFY(open_ranks(w, kRanksDir, 2));
  RanksView* v = w.ranksView();
  RanksMemoryView* m = v->memory();
  QCOMPARE(m->lanes(), 2);
  std::uint64_t highest = 0;
  std::vector<Trace> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(read_run_dir((kRanksDir + "/rank-" + QString::number(rank)).toStdString()));
    highest = std::max(highest, ranks.back().peak_bytes);
  }
  QCOMPARE(m->scaleBytes(), highest);
  for (int rank = 0; rank < 2; ++rank) {
    QCPGraph* g = m->lane(rank);
    QVERIFY(g && !g->data()->isEmpty());
    double top = -1e9;
    for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) top = std::max(top, it->value);
    QCOMPARE(top, m->laneValue(rank, static_cast<double>(ranks[static_cast<std::size_t>(rank)].peak_bytes)));
    QVERIFY(top < m->laneValue(rank, static_cast<double>(highest)) + 1e-12);  // within its lane
  }
  // One time axis: zooming the memory lanes moves the op lanes.
  m->plot()->xAxis->setRange(1000, 500000);
  QCOMPARE(v->timelines()->plot()->xAxis->range().lower, 1000.0);
  QCOMPARE(v->timelines()->plot()->xAxis->range().upper, 500000.0);
  v->timelines()->resetZoom();
  QCOMPARE(m->plot()->xAxis->range().upper, v->timelines()->plot()->xAxis->range().upper);

  // The flows: every exchange of the two ranks linked, all drawn at full zoom.
  RanksTimelineView* t = v->timelines();
  QVERIFY(!t->links().flows.empty());
  QCOMPARE(t->links().unmatched, std::size_t{0});
  t->plot()->replot(QCustomPlot::rpImmediateRefresh);
  QCOMPARE(t->flows()->lastDrawn(), t->links().flows.size());
  // Off with the box; none when rank 1's collectives are hidden.
  v->flowsBox()->setChecked(false);
  QVERIFY(!t->flows()->visible());
  v->flowsBox()->setChecked(true);
  t->setTrackHidden(3, true);  // "1 comm"
  QCOMPARE(t->commPosition(1), -1);
  t->plot()->replot(QCustomPlot::rpImmediateRefresh);
  QCOMPARE(t->flows()->lastDrawn(), std::size_t{0});
  t->resetTracks();
  t->setTrackPinned(3, true);  // on top: the arrows follow the row
  QCOMPARE(t->commPosition(1), 0);
  t->plot()->replot(QCustomPlot::rpImmediateRefresh);
  QCOMPARE(t->flows()->lastDrawn(), t->links().flows.size());
}

QTEST_MAIN(GuiRanksViewTest)
#include "gui_ranks_view_test.moc"
