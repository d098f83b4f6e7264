#include "export.h"

#include <QDir>
#include <QFileInfo>
#include <filesystem>
#include <utility>
#include <vector>
#include <qcustomplot.h>

#include "core/analysis/rank_check.h"
#include "core/trace/chrome_trace.h"
#include "core/trace/run_dir.h"
#include "core/util/error.h"
#include "views/axis_tickers.h"

namespace remat::gui {

QStringList export_csv_tables(const Trace& t, const QString& dir) {
  if (!QDir().mkpath(dir)) throw Error("cannot create the directory '" + dir.toStdString() + "'");
  write_csv_tables(t, dir.toStdString());
  QStringList out;
  for (const auto& f : csv_table_files()) out << QDir(dir).filePath(QString::fromStdString(f));
  return out;
}

void export_chrome_trace(const Trace& t, const QString& path) { write_chrome_trace(t, path.toStdString()); }

QString export_ranks_chrome_trace(const RanksDir& r, const std::vector<const Trace*>& ranks, const QString& path) {
  std::vector<ChromeRank> out;
  const std::vector<RankIssue> missing = chrome_ranks(r, ranks, out);
  write_ranks_chrome_trace(out, path.toStdString());
  return QString::fromStdString(describe(missing));
}

void save_run_dir(const Trace& t, const QString& dir, bool force) { write_run_dir(t, dir.toStdString(), force); }

namespace {

// A title for an axis the screen leaves untitled (the memory timeline's time axis sits over the
// op timeline's title), from what its ticker shows.
QString axis_title(QCPAxis* a) {
  QCPAxisTicker* t = a->ticker().data();
  if (dynamic_cast<TimeTicker*>(t)) return QObject::tr("time in the step");
  if (dynamic_cast<FractionTicker*>(t)) return QObject::tr("fraction of the step");
  if (dynamic_cast<BytesTicker*>(t)) return QObject::tr("bytes");
  return {};
}

// What the export changes on the plot for the file, put back when it is written: the hover
// decorations (the "overlay" layer: the crosshair) hidden, every axis with tick labels titled,
// and ticks of length 0 (rows labelled without tick marks) drawn with no pen. The PDF engine
// strokes a translucent pen as a filled outline, and the outline of a zero-length line is an
// empty path that it still closes and fills ("h f" with no current point, which PDF readers
// warn about).
class ExportLook {
 public:
  explicit ExportLook(QCustomPlot* plot) : plot_(plot) {
    if (QCPLayer* hover = plot->layer("overlay"); hover && hover->visible()) {
      hover->setVisible(false);
      hidden_ = hover;
    }
    for (QCPAxisRect* r : plot->axisRects())
      for (QCPAxis* a : r->axes())
        if (a->visible() && a->tickLabels() && a->label().isEmpty())
          if (const QString t = axis_title(a); !t.isEmpty()) {
            a->setLabel(t);
            titled_.push_back(a);
          }
    for (QCPAxisRect* r : plot->axisRects())
      for (QCPAxis* a : r->axes()) {
        if (a->tickLengthIn() == 0 && a->tickLengthOut() == 0 && a->tickPen().style() != Qt::NoPen) {
          tick_pens_.push_back({a, a->tickPen()});
          a->setTickPen(Qt::NoPen);
        }
        if (a->subTickLengthIn() == 0 && a->subTickLengthOut() == 0 && a->subTickPen().style() != Qt::NoPen) {
          sub_tick_pens_.push_back({a, a->subTickPen()});
          a->setSubTickPen(Qt::NoPen);
        }
      }
  }
  ~ExportLook() {
    if (hidden_) hidden_->setVisible(true);
    for (QCPAxis* a : titled_) a->setLabel({});
    for (const auto& [a, pen] : tick_pens_) a->setTickPen(pen);
    for (const auto& [a, pen] : sub_tick_pens_) a->setSubTickPen(pen);
    plot_->replot(QCustomPlot::rpQueuedReplot);
  }
  ExportLook(const ExportLook&) = delete;
  ExportLook& operator=(const ExportLook&) = delete;

 private:
  QCustomPlot* plot_;
  QCPLayer* hidden_ = nullptr;
  std::vector<QCPAxis*> titled_;
  std::vector<std::pair<QCPAxis*, QPen>> tick_pens_, sub_tick_pens_;
};

}  // namespace

void export_plot(QCustomPlot* plot, const QString& path, int width, int height) {
  const QFileInfo info(path);
  const QString suffix = info.suffix().toLower();
  if (suffix != "png" && suffix != "pdf")
    throw Error("'" + path.toStdString() + "': choose a .png or .pdf file name");
  if (!info.absoluteDir().exists()) throw Error("the directory of '" + path.toStdString() + "' does not exist");
  // QCustomPlot picks the format by its own argument, not by the name, so the temporary name
  // can keep the suffix.
  const QString tmp = info.absoluteDir().filePath("." + info.completeBaseName() + ".tmp-" +
                                                  QString::number(QCoreApplication::applicationPid()) + "." + suffix);
  bool ok = false;
  {
    const ExportLook look(plot);
    ok = suffix == "png" ? plot->savePng(tmp, width, height, 2.0)
                         : plot->savePdf(tmp, width, height, QCP::epNoCosmetic, "RematLab", info.completeBaseName());
  }
  if (!ok) {
    QFile::remove(tmp);
    throw Error("could not write '" + path.toStdString() + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp.toStdString(), info.absoluteFilePath().toStdString(), ec);
  if (ec) {
    QFile::remove(tmp);
    throw Error("could not write '" + path.toStdString() + "': " + ec.message());
  }
}

}  // namespace remat::gui
