#include "import_open.h"

#include <QFileDialog>
#include <QFileInfo>

#include "core/trace/import_trace.h"
#include "core/trace/run_dir.h"

namespace remat::gui {

bool is_importable_file(const QString& path) {
  const QFileInfo info(path);
  if (!info.isFile()) return false;
  const QString s = info.suffix().toLower();
  return s == "pickle" || s == "pkl" || s == "json";
}

std::shared_ptr<const Trace> read_run_or_import(const QString& path) {
  const std::string p = path.toStdString();
  if (is_importable_file(path)) return std::make_shared<const Trace>(import_trace_file(p));
  return std::make_shared<const Trace>(read_run_dir(p));
}

QString pick_import_file(QWidget* parent, const QString& dir) {
  return QFileDialog::getOpenFileName(
      parent, QObject::tr("Open a PyTorch memory snapshot or profiler trace"), dir,
      QObject::tr("PyTorch snapshots and traces (*.pickle *.pkl *.json);;All files (*)"));
}

}  // namespace remat::gui
