// The Analysis page: at 1280×800 every column of every table on it shows its whole header and
// lies inside the table (no sideways scroll needed), for a RematLab run, a recording and an
// imported snapshot; a trace from PyTorch shows what it holds instead of a formula for its
// placeholder model, and a recording's bytes per module sum to what the recording held.
#include <QFile>
#include <QHeaderView>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QScrollBar>
#include <QSignalSpy>
#include <QStyle>
#include <QTableView>
#include <QTableWidget>
#include <QtTest>
#include <set>

#include "core/trace/run_dir.h"
#include "gui_test_util.h"
#include "import_open.h"
#include "main_window.h"
#include "views/analysis_view.h"

using namespace remat;
using namespace remat::gui;

namespace {

const QString kData = remat::gui::testing::gui_test_data();
const QString kRecorded = kData + "/recorded-gpt2";
const QString kSnapshot = kData + "/../../data/torch/snapshot-torch2.pickle";

// Every column of `t` whose header text is cut or that lies (partly) outside the viewport.
QStringList cut_columns(QTableView* t, const QString& name) {
  QStringList out;
  QHeaderView* h = t->horizontalHeader();
  const int margin = 2 * t->style()->pixelMetric(QStyle::PM_HeaderMargin, nullptr, h);
  const QFontMetrics fm(h->font());
  for (int c = 0; c < h->count(); ++c) {
    if (h->isSectionHidden(c)) continue;
    const QString text = t->model()->headerData(c, Qt::Horizontal).toString();
    const int need = fm.horizontalAdvance(text) + margin;
    const int right = h->sectionViewportPosition(c) + h->sectionSize(c);
    if (h->sectionSize(c) < need)
      out << QString("%1: '%2' needs %3 px, has %4").arg(name, text).arg(need).arg(h->sectionSize(c));
    else if (h->sectionViewportPosition(c) < 0 || right > t->viewport()->width())
      out << QString("%1: '%2' ends at %3 of %4 px").arg(name, text).arg(right).arg(t->viewport()->width());
  }
  return out;
}

// The shown tables of the Analysis page, each checked.
QStringList cut_columns_on(AnalysisView* v, int* tables) {
  QStringList out;
  *tables = 0;
  for (QTableView* t : v->findChildren<QTableView*>()) {
    if (!t->isVisible()) continue;
    ++*tables;
    out << cut_columns(t, t->model()->headerData(0, Qt::Horizontal).toString() + " table");
  }
  return out;
}

QJsonObject summary_of(const QString& dir) {
  QFile f(dir + "/summary.json");
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QJsonDocument::fromJson(f.readAll()).object();
}

// Rows of the recording's saved_tensors.csv held at backward that are not parameters.
int held_rows(const QString& dir) {
  QFile f(dir + "/saved_tensors.csv");
  if (!f.open(QIODevice::ReadOnly | QIODevice::Text)) return -1;
  const QStringList head = QString::fromUtf8(f.readLine()).trimmed().split(',');
  const int alias = static_cast<int>(head.indexOf("alias")), held = static_cast<int>(head.indexOf("held_at_backward"));
  int n = 0;
  while (!f.atEnd()) {
    const QStringList row = QString::fromUtf8(f.readLine()).trimmed().split(',');
    if (row.size() == head.size() && row[held] == "1" && !row[alias].startsWith("parameter:")) ++n;
  }
  return n;
}

}  // namespace

class GuiAnalysisPageTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { testing::isolate_settings(); }
  void everyColumnFitsAt1280x800();
  void aRecordingShowsItsBytesPerModule();
  void anImportedSnapshotShowsWhatItHolds();
  void ownRunsKeepTheFormula();

 private:
  QTemporaryDir tmp_;
};

void GuiAnalysisPageTest::everyColumnFitsAt1280x800() {
  MainWindow w(testing::window_options(tmp_, false, false));
  w.resize(1280, 800);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  QSignalSpy done(&w, &MainWindow::readsDone);
  for (const QString& dir : {kData + "/../../data/run-v2", kData + "/../../data/run-v1", kRecorded, kSnapshot})
    w.openRunDir(dir);
  QVERIFY(QTest::qWaitFor([&] { return w.runs()->rowCount() == 4 && w.pendingReads() == 0; }, 60000));
  w.pages()->setCurrentWidget(w.analysisView());
  QCOMPARE(w.size(), QSize(1280, 800));
  // Each run in turn: the formula's tables for the RematLab runs, the trace's for the others.
  for (int row = 0; row < w.runs()->rowCount(); ++row) {
    w.showRun(row);
    QApplication::processEvents();
    int tables = 0;
    const QStringList cut = cut_columns_on(w.analysisView(), &tables);
    QVERIFY2(tables >= 3, qPrintable(QString("run %1: %2 tables shown").arg(row).arg(tables)));
    QVERIFY2(cut.isEmpty(), qPrintable(QString("run %1: ").arg(row) + cut.join("; ")));
  }
}

void GuiAnalysisPageTest::aRecordingShowsItsBytesPerModule() {
  AnalysisView v;
  v.resize(1200, 700);
  v.show();
  RunEntry e;
  e.trace = read_run_or_import(kRecorded);
  e.dir = kRecorded;
  e.label = "#1 recorded";
  QCOMPARE(QString::fromStdString(e.trace->source), QString(kRecordedSource));
  v.setCurrent(e);
  QVERIFY(!v.showsFormula());
  QVERIFY(!v.blockTable()->isVisible());
  QVERIFY(!v.termTable()->isVisible());
  QVERIFY(v.holdingsTable()->isVisible());
  const QString text = v.traceContents()->text();
  QVERIFY2(text.contains("pytorch") && text.contains("needs a RematLab model"), qPrintable(text));
  const QString torch = summary_of(kRecorded)["provenance"].toObject()["torch"].toString();
  QVERIFY(!torch.isEmpty());
  QVERIFY2(text.contains(torch), qPrintable(text));
  // The modules' rows (and the total row under them) sum to what the recorder says was held.
  QTableWidget* t = v.holdingsTable();
  QCOMPARE(t->horizontalHeaderItem(0)->text(), QString("Module"));
  QVERIFY(t->rowCount() > 3);
  std::set<QString> modules;
  qulonglong sum = 0, tensors = 0;
  for (int r = 0; r + 1 < t->rowCount(); ++r) {
    QVERIFY2(modules.insert(t->item(r, 0)->text()).second, qPrintable(t->item(r, 0)->text()));
    sum += t->item(r, 3)->toolTip().section(' ', 0, 0).toULongLong();
    tensors += t->item(r, 2)->text().toULongLong();
  }
  QVERIFY(modules.count("h.0.attn") && modules.count("h.1.mlp"));
  const auto held = summary_of(kRecorded)["recorded"].toObject()["saved_bytes_at_backward"].toInteger();
  QVERIFY(held > 0);
  QCOMPARE(sum, static_cast<qulonglong>(held));
  const int last = t->rowCount() - 1;
  QCOMPARE(t->item(last, 0)->text(), QString("total"));
  QCOMPARE(t->item(last, 3)->toolTip(), QString("%1 bytes").arg(held));
  QCOMPARE(tensors, static_cast<qulonglong>(held_rows(kRecorded)));
  QCOMPARE(t->item(last, 2)->text().toULongLong(), tensors);
  // Without its tables (a recording copied without saved_tensors.csv): the categories instead.
  e.dir.clear();
  v.setCurrent(e);
  QCOMPARE(v.holdingsTable()->horizontalHeaderItem(0)->text(), QString("Category"));
}

void GuiAnalysisPageTest::anImportedSnapshotShowsWhatItHolds() {
  AnalysisView v;
  v.resize(1200, 700);
  v.show();
  RunEntry e;
  e.trace = read_run_or_import(kSnapshot);
  e.label = "#1 snapshot";
  QVERIFY(e.trace->imported());
  v.setCurrent(e);
  v.setRuns({e});
  QVERIFY(!v.showsFormula());
  QVERIFY(!v.blockTable()->isVisible());
  const QString text = v.traceContents()->text();
  QVERIFY2(text.contains("pytorch-snapshot") && text.contains("needs a RematLab model"), qPrintable(text));
  QVERIFY2(text.contains("snapshot-torch2.pickle"), qPrintable(text));
  QVERIFY2(text.contains(QString("Memory events: %L1").arg(e.trace->events.size())), qPrintable(text));
  // One row per category that allocated, with its allocations counted from the events.
  std::map<QString, qulonglong> allocs;
  for (const MemoryEvent& m : e.trace->events)
    if (m.delta > 0) ++allocs[QString::fromLatin1(to_string(m.category)).replace('_', ' ')];
  QTableWidget* t = v.holdingsTable();
  QCOMPARE(t->horizontalHeaderItem(0)->text(), QString("Category"));
  QCOMPARE(t->rowCount(), static_cast<int>(allocs.size()));
  for (int r = 0; r < t->rowCount(); ++r) {
    const QString c = t->item(r, 0)->text();
    QVERIFY2(allocs.count(c), qPrintable(c));
    QCOMPARE(QLocale().toULongLong(t->item(r, 1)->text()), allocs[c]);
    QVERIFY2(text.contains(c), qPrintable(c + " not among the categories seen: " + text));
  }
  // Never simulated: no prediction, no difference.
  QCOMPARE(v.predictionTable()->item(0, 1)->text(), QString("—"));
  QCOMPARE(v.predictionTable()->item(0, 3)->text(), QString("—"));
}

void GuiAnalysisPageTest::ownRunsKeepTheFormula() {
  AnalysisView v;
  v.resize(1200, 700);
  v.show();
  RunEntry e;
  e.trace = std::make_shared<const Trace>(read_run_dir((kData + "/../../data/run-v2").toStdString()));
  v.setCurrent(e);
  QVERIFY(v.showsFormula());
  QVERIFY(v.blockTable()->isVisible());
  QCOMPARE(v.blockTable()->rowCount(), static_cast<int>(e.trace->saved_bytes_per_block.size()));
  QVERIFY(v.termTable()->rowCount() > 1);
}

QTEST_MAIN(GuiAnalysisPageTest)
#include "gui_analysis_page_test.moc"
