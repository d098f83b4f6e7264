// Opening what PyTorch users already have in the desktop app: a torch.cuda memory snapshot
// (.pickle, .pkl) or a torch.profiler trace (.json) is converted by the core importer
// (core/trace/import_trace.h) and shown like a run; anything else is a run directory.
#pragma once
#include <QString>
#include <memory>

#include "core/trace/trace.h"

class QWidget;

namespace remat::gui {

// Whether `path` names a file Open imports (by its suffix: .pickle, .pkl, .json).
bool is_importable_file(const QString& path);
// The trace of a run directory, or of an imported file; throws remat::Error as the readers do.
// Runs off the GUI thread (MainWindow::openRunDir).
std::shared_ptr<const Trace> read_run_or_import(const QString& path);
// A file dialog for a snapshot or a profiler trace; empty when cancelled.
QString pick_import_file(QWidget* parent, const QString& dir);

}  // namespace remat::gui
