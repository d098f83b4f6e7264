// What the app writes to disk, each file atomically (written under a temporary name next to the
// target and renamed into place): the CSV tables of a run (the files the batch mode writes), its
// Chrome trace, a whole run directory, and any plot as PNG or PDF. Errors throw remat::Error.
#pragma once
#include <QString>
#include <QStringList>

#include <vector>

#include "core/trace/ranks_dir.h"
#include "core/trace/trace.h"

class QCustomPlot;

namespace remat::gui {

// The CSV tables into `dir` (created if missing); returns the paths written.
QStringList export_csv_tables(const Trace& t, const QString& dir);
void export_chrome_trace(const Trace& t, const QString& path);
// A run of several ranks as one Chrome trace (core/trace/chrome_trace.h: a process per rank,
// flows between partner collectives), from the ranks as read (`ranks[i]` null: not read, left
// out). A rank of another job is refused (Error naming what differs); returns what was left out
// ("" when nothing).
QString export_ranks_chrome_trace(const RanksDir& r, const std::vector<const Trace*>& ranks, const QString& path);
void save_run_dir(const Trace& t, const QString& dir, bool force);
// PNG or PDF by the file's suffix; width and height 0: the plot's size on screen.
void export_plot(QCustomPlot* plot, const QString& path, int width = 0, int height = 0);

}  // namespace remat::gui
