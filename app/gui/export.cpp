#include "export.h"

#include <QDir>
#include <QFileInfo>
#include <filesystem>
#include <qcustomplot.h>

#include "core/trace/run_dir.h"
#include "core/util/error.h"

namespace remat::gui {

QStringList export_csv_tables(const Trace& t, const QString& dir) {
  if (!QDir().mkpath(dir)) throw Error("cannot create the directory '" + dir.toStdString() + "'");
  write_csv_tables(t, dir.toStdString());
  QStringList out;
  for (const auto& f : csv_table_files()) out << QDir(dir).filePath(QString::fromStdString(f));
  return out;
}

void export_chrome_trace(const Trace& t, const QString& path) { write_chrome_trace(t, path.toStdString()); }

void save_run_dir(const Trace& t, const QString& dir, bool force) { write_run_dir(t, dir.toStdString(), force); }

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
  const bool ok = suffix == "png" ? plot->savePng(tmp, width, height, 2.0)
                                  : plot->savePdf(tmp, width, height, QCP::epNoCosmetic, "RematLab",
                                                  info.completeBaseName());
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
