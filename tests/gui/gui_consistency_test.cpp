// The views agree with each other and with what they export: the ledger names blocks and
// tensors as the op timeline does (a filter on "h2" finds block 2's rows), an exported plot has
// no hover crosshair and titles on its axes, the PDF export draws no path without a current
// point, the formula table's byte counts fit their column, and an unchecked check box has a
// visible border on the dark palette.
#include <QApplication>
#include <QCheckBox>
#include <QFile>
#include <QHeaderView>
#include <QImage>
#include <QMouseEvent>
#include <QRegularExpression>
#include <QSortFilterProxyModel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <qcustomplot.h>

#include "export.h"
#include "gui_test_util.h"
#include "run_entry.h"
#include "theme.h"
#include "views/analysis_view.h"
#include "views/ledger_view.h"
#include "views/memory_timeline_view.h"
#include "views/run_view.h"

using namespace remat;
using namespace remat::gui;

namespace {

// Pixels that differ between two images of one size.
int differing_pixels(const QImage& a, const QImage& b) {
  if (a.size() != b.size()) return -1;
  const QImage x = a.convertToFormat(QImage::Format_ARGB32), y = b.convertToFormat(QImage::Format_ARGB32);
  int n = 0;
  for (int r = 0; r < x.height(); ++r)
    for (int c = 0; c < x.width(); ++c) n += x.pixel(c, r) != y.pixel(c, r);
  return n;
}

// Bands of rows with ink (pixels unlike the background, its corner pixel) separated by blank
// rows, in the bottom `rows` rows: the plot area, the tick labels, an axis title.
int ink_bands_in_bottom_rows(const QImage& img, int rows) {
  const QImage x = img.convertToFormat(QImage::Format_ARGB32);
  const QRgb bg = x.pixel(0, 0);
  int bands = 0;
  bool in_band = false;
  for (int r = x.height() - rows; r < x.height(); ++r) {
    bool ink = false;
    for (int c = 0; c < x.width() && !ink; ++c) ink = x.pixel(c, r) != bg;
    bands += ink && !in_band;
    in_band = ink;
  }
  return bands;
}

// The page content streams of a PDF, inflated (Qt writes them with zlib's Flate).
QList<QByteArray> pdf_streams(const QByteArray& pdf) {
  QList<QByteArray> out;
  qsizetype at = 0;
  while ((at = pdf.indexOf("stream\n", at)) >= 0) {
    const qsizetype begin = at + 7, end = pdf.indexOf("endstream", begin);
    if (end < 0) break;
    const QByteArray raw = pdf.mid(begin, end - begin);
    const qsizetype dict_at = pdf.lastIndexOf("<<", at);
    const QByteArray dict = dict_at >= 0 ? pdf.mid(dict_at, at - dict_at) : QByteArray();
    at = end + 9;  // past "endstream", whose tail is "stream" too
    // Page content only: not images, fonts or other typed streams.
    if (dict.contains("/Subtype") || dict.contains("/Type") || dict.contains("/Length1")) continue;
    if (dict.contains("/FlateDecode")) {
      QByteArray sized(4, '\0');
      const quint32 hint = static_cast<quint32>(raw.size()) * 40 + 4096;
      sized[0] = static_cast<char>(hint >> 24);
      sized[1] = static_cast<char>(hint >> 16);
      sized[2] = static_cast<char>(hint >> 8);
      sized[3] = static_cast<char>(hint);
      out << qUncompress(sized + raw);
    } else {
      out << raw;
    }
    if (out.back().contains("begincmap")) out.removeLast();
  }
  return out;
}

// Content-stream paths that close (h) without a current point: an "h" (or "b", "s") after a
// painting or clipping operator with no moveto or re in between.
int closepaths_without_point(const QByteArray& stream) {
  static const QRegularExpression tokens(R"([^\s\[\]()<>/]+)");
  bool have_point = false;
  int bad = 0;
  for (auto it = tokens.globalMatch(QString::fromLatin1(stream)); it.hasNext();) {
    const QString t = it.next().captured();
    if (t == "m" || t == "re") have_point = true;
    else if (t == "h" || t == "b" || t == "b*" || t == "s") {
      if (!have_point) ++bad;
      if (t != "h") have_point = false;
    } else if (t == "f" || t == "f*" || t == "F" || t == "S" || t == "B" || t == "B*" || t == "n" || t == "W" ||
               t == "W*") {
      if (t != "W" && t != "W*") have_point = false;
    }
  }
  return bad;
}

}  // namespace

class GuiConsistencyTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void ledgerNamesBlocksAsTheOpTimeline();
  void exportedPngHasNoCrosshairAndHasAxisTitles();
  void pdfExportClosesNoPathWithoutAPoint();
  void formulaBytesFitTheirColumn();
  void uncheckedBoxesShowOnTheDarkPalette();

 private:
  QTemporaryDir tmp_;
  std::shared_ptr<const Trace> tiny_;
};

void GuiConsistencyTest::initTestCase() {
  testing::isolate_settings();
  apply_theme(*qApp, ThemeChoice::Light);
  tiny_ = testing::train("tiny", "uniform", 1);
}

void GuiConsistencyTest::ledgerNamesBlocksAsTheOpTimeline() {
  const Trace& t = *tiny_;
  QVERIFY(t.model.layers >= 3 && t.model.layers <= 10);  // "h2" is then block 2 only
  // The op timeline's names: block 2's ops are "h2.…".
  int ops2 = 0;
  for (const auto& o : t.ops)
    if (o.block == 2 && o.stream == Stream::Compute) {
      QVERIFY2(QString::fromStdString(o.name).startsWith("h2."), o.name.c_str());
      ++ops2;
    }
  QVERIFY(ops2 > 0);
  LedgerView ledger;
  ledger.setTrace(tiny_);
  int rows2 = 0;
  for (const auto& e : t.ledger) rows2 += e.block == 2;
  QVERIFY(rows2 > 0);
  ledger.setFilter("h2");
  QCOMPARE(ledger.proxy()->rowCount(), rows2);
  for (int r = 0; r < ledger.proxy()->rowCount(); ++r) {
    QCOMPARE(ledger.proxy()->index(r, LedgerModel::Block).data().toString(), QString("h2"));
    QVERIFY(ledger.proxy()->index(r, LedgerModel::Tensor).data().toString().startsWith("h2."));
  }
  // "h2.attn" finds block 2's attention tensors, as it finds its attention ops.
  ledger.setFilter("h2.attn");
  QVERIFY(ledger.proxy()->rowCount() > 0 && ledger.proxy()->rowCount() < rows2);
}

void GuiConsistencyTest::exportedPngHasNoCrosshairAndHasAxisTitles() {
  MemoryTimelineView view;
  view.resize(900, 420);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  view.setTrace(tiny_, "tiny · uniform");
  QCustomPlot* plot = view.plot();
  QVERIFY(plot->xAxis->label().isEmpty());  // on screen the time axis is untitled
  const QString calm = tmp_.filePath("calm.png"), hovered = tmp_.filePath("hovered.png");
  export_plot(plot, calm, 900, 420);
  const QImage before = plot->grab().toImage();
  // The pointer over the middle of the plot: the crosshair is drawn on screen ...
  const QPoint at = plot->axisRect()->rect().center();
  QMouseEvent move(QEvent::MouseMove, QPointF(at), plot->mapToGlobal(QPointF(at)), Qt::NoButton, Qt::NoButton,
                   Qt::NoModifier);
  QApplication::sendEvent(plot, &move);
  plot->replot();
  const QImage during = plot->grab().toImage();
  QVERIFY2(differing_pixels(before, during) > 0, "the hover draws nothing: the check proves nothing");
  // ... and not in the file.
  export_plot(plot, hovered, 900, 420);
  const QImage a(calm), b(hovered);
  QVERIFY(!a.isNull() && !b.isNull());
  QCOMPARE(differing_pixels(a, b), 0);
  // The export titles the time axis and leaves the screen as it was.
  QVERIFY(plot->xAxis->label().isEmpty());
  const QString bare = tmp_.filePath("bare.png");
  QVERIFY(plot->savePng(bare, 900, 420, 2.0));
  const int rows = a.height() * 15 / 100;
  const int with_title = ink_bands_in_bottom_rows(a, rows), without = ink_bands_in_bottom_rows(QImage(bare), rows);
  QVERIFY2(with_title == without + 1, qPrintable(QString("%1 bands of ink under the plot in the export, %2 without a title")
                                                     .arg(with_title).arg(without)));
}

void GuiConsistencyTest::pdfExportClosesNoPathWithoutAPoint() {
  RunView view;
  view.resize(1100, 800);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  view.setTrace(tiny_, "tiny · uniform");
  QVERIFY(testing::wait_loaded(view));
  int checked = 0;
  QStringList failures;
  for (QCustomPlot* p : view.findChildren<QCustomPlot*>()) {
    const QString path = tmp_.filePath(QString("plot-%1.pdf").arg(checked));
    export_plot(p, path, 900, 400);
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QList<QByteArray> streams = pdf_streams(f.readAll());
    QVERIFY(!streams.isEmpty());
    int bad = 0;
    qsizetype ops = 0;
    for (const QByteArray& s : streams) {
      bad += closepaths_without_point(s);
      ops += s.count(" l\n") + s.count(" m\n");
    }
    QVERIFY2(ops > 0, "the streams were read (drawing operators found)");
    if (bad) failures << QString("%1 in %2 (%3)").arg(bad).arg(path, p->parent()->metaObject()->className());
    ++checked;
  }
  QVERIFY(checked >= 3);
  QVERIFY2(failures.isEmpty(), qPrintable("closepaths without a current point: " + failures.join(", ")));
}

void GuiConsistencyTest::formulaBytesFitTheirColumn() {
  AnalysisView view;
  view.resize(1000, 700);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  RunEntry e;
  e.trace = tiny_;
  e.label = "#1 tiny · uniform";
  view.setCurrent(e);
  QApplication::processEvents();
  QTableWidget* t = view.formulaTerms();
  QVERIFY(t->rowCount() > 1);
  const int bytes_col = 2;
  for (int r = 0; r < t->rowCount(); ++r) {
    QTableWidgetItem* it = t->item(r, bytes_col);
    QVERIFY(it);
    QFont f = it->font();
    const int need = QFontMetrics(f).horizontalAdvance(it->text());
    QVERIFY2(t->columnWidth(bytes_col) >= need, qPrintable(QString("'%1' needs %2 px, the column has %3")
                                                              .arg(it->text()).arg(need).arg(t->columnWidth(bytes_col))));
  }
  // ... and the column is inside the table's viewport.
  const int right = t->horizontalHeader()->sectionViewportPosition(bytes_col) + t->columnWidth(bytes_col);
  QVERIFY2(right <= t->viewport()->width(), qPrintable(QString("%1 > %2").arg(right).arg(t->viewport()->width())));
}

void GuiConsistencyTest::uncheckedBoxesShowOnTheDarkPalette() {
  apply_theme(*qApp, ThemeChoice::Dark);
  QCheckBox box("shown");
  box.setChecked(false);
  box.resize(box.sizeHint());
  const QImage img = box.grab().toImage().convertToFormat(QImage::Format_ARGB32);
  apply_theme(*qApp, ThemeChoice::Light);
  // The indicator's border: the brightest pixel of the indicator's rim against the window colour.
  QStyleOptionButton opt;
  opt.initFrom(&box);
  const QRect ind = box.style()->subElementRect(QStyle::SE_CheckBoxIndicator, &opt, &box);
  QVERIFY(ind.width() > 4);
  const QColor window = box.palette().color(QPalette::Window);
  int best = 0;
  const qreal dpr = img.devicePixelRatio();
  for (int x = ind.left(); x <= ind.right(); ++x)
    for (int y : {ind.top(), ind.bottom()}) {
      const QColor c = img.pixelColor(static_cast<int>(x * dpr), static_cast<int>(y * dpr));
      best = std::max(best, std::abs(c.lightness() - window.lightness()));
    }
  QVERIFY2(best >= 60, qPrintable(QString("the border differs from the window by %1 of 255 in lightness").arg(best)));
}

QTEST_MAIN(GuiConsistencyTest)
#include "gui_consistency_test.moc"
