// The main window's actions: run and cancel, what happens when a run ends, opening run
// directories, exporting, and the screenshot of the window.
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QJsonDocument>
#include <QJsonObject>
#include <QListView>
#include <QMessageBox>
#include <QSaveFile>
#include <QStatusBar>
#include <QTabWidget>
#include <QtConcurrent/QtConcurrentRun>
#include <qcustomplot.h>

#include "core/trace/output_dir.h"
#include "core/trace/run_dir.h"
#include "core/trace/schema.h"
#include "core/trace/sweep_json.h"
#include "core/util/error.h"
#include "export.h"
#include "import_open.h"
#include "main_window.h"
#include "run_controller.h"
#include "run_panel.h"
#include "views/analysis_view.h"
#include "views/compare_view.h"
#include "views/memory_timeline_view.h"
#include "views/plot_view.h"
#include "views/ranks_view.h"
#include "views/run_view.h"

namespace remat::gui {

bool MainWindow::startRun() {
  if (controller_->running()) return false;
  QString why;
  auto req = panel_->request(&why);
  if (!req || !panel_->runButton()->isEnabled()) {
    if (why.isEmpty()) why = panel_->lastPrediction().error;
    panel_->showError(tr("Cannot run: %1").arg(why));
    return false;
  }
  panel_->setRunning(true);
  statusBar()->showMessage(tr("Running %1 under %2…").arg(QString::fromStdString(req->model.name),
                                                            QString::fromStdString(req->policy.name)));
  return controller_->start(*req);
}

void MainWindow::cancelRun() {
  if (!controller_->running()) return;
  controller_->cancel();
  statusBar()->showMessage(tr("Cancelling after the current op…"));
}

void MainWindow::onRunFinished(std::shared_ptr<const Trace> trace, const QString& dir, const QString& save_error) {
  panel_->setRunning(false);
  const Trace& t = *trace;
  const int row = runs_->add(trace, dir);
  addRecent(dir);
  run_list_->setCurrentIndex(runs_->index(row));
  showRun(row);
  pages_->setCurrentIndex(0);
  QStringList problems;
  if (!t.complete) {
    // "run cancelled after 23 of 200 steps", not the status said twice ("run cancelled: run cancelled").
    const int done = static_cast<int>(t.step_times_ms().size());
    QString what = tr("run %1 after %2 of %3 steps").arg(incomplete_state(t)).arg(done).arg(t.steps);
    const QString err = QString::fromStdString(t.error);
    if (!err.isEmpty() && !err.contains(QString::fromStdString(t.status)) && !err.contains(incomplete_state(t)))
      what += ": " + err;
    problems << what;
  }
  if (!save_error.isEmpty()) problems << tr("not saved: %1").arg(save_error);
  panel_->showError(problems.join("\n"));
  message_row_ = problems.isEmpty() ? -1 : row;
  panel_->setProgress(t.complete ? 1.0 : 0.0, t.complete ? tr("Done") : QString::fromStdString(t.status));
  statusBar()->showMessage(t.complete ? tr("Run finished%1").arg(dir.isEmpty() ? QString() : tr(", saved to %1").arg(dir))
                                      : tr("Run %1").arg(QString::fromStdString(t.status)),
                           8000);
  emit runAdded(row);
  emit runFinished(row);
}

void MainWindow::onRunFailed(const QString& error) {
  panel_->setRunning(false);
  panel_->setProgress(0, tr("Failed"));
  panel_->showError(error);
  statusBar()->showMessage(tr("The run failed"), 8000);
  emit runFailed(error);
}

void MainWindow::noteLeftovers(const QString& dir) {
  for (const auto& l : leftovers_around(dir.toStdString()))
    if (!leftovers_.contains(QString::fromStdString(l.path))) leftovers_ << QString::fromStdString(l.path);
}

void MainWindow::showLeftovers() {
  if (leftovers_.isEmpty()) return;
  statusBar()->showMessage(tr("Left over from interrupted writes: %1 (`rematlab-batch clean` removes them)")
                               .arg(leftovers_.join(", ")),
                           20000);
  leftovers_.clear();
}

namespace {
// The run directories sweep.json lists, in its order; none when there is no readable sweep.json
// (its error is the CLI's to tell: the runs are opened by name then).
QStringList sweep_run_dirs(const QString& dir) {
  QStringList out;
  const QString path = QDir(dir).filePath(QString::fromUtf8(schema::kSweepFile));
  if (!QFileInfo::exists(path)) return out;
  try {
    const nlohmann::json j = read_sweep_json(path.toStdString());
    for (const auto& r : j.at("runs")) out << QString::fromStdString(r.at("dir").get<std::string>());
  } catch (const std::exception&) {
    out.clear();
  }
  return out;
}
}  // namespace

void MainWindow::openRunDirAs(const QString& dir, bool remember) {
  noteLeftovers(dir);
  const QDir d(dir);
  if (openRanksDir(dir, remember)) return;
  if (d.exists() && !d.exists("summary.json")) {
    // A sweep directory, or any directory of run directories: open each, in sweep.json's order
    // (the CLI's), else by name.
    QStringList subs = sweep_run_dirs(dir);
    if (subs.isEmpty()) subs = d.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name);
    QStringList runs;
    for (const QString& s : subs)
      if (QFileInfo::exists(d.filePath(s + "/summary.json"))) runs << d.filePath(s);
    if (!runs.isEmpty()) {
      addRecent(dir);
      for (const QString& r : runs) openRunDirAs(r, false);
      return;
    }
  }
  const int existing = runs_->findDir(dir);
  if (existing >= 0) {
    run_list_->setCurrentIndex(runs_->index(existing));
    showRun(existing);
    if (pending_reads_ == 0) showLeftovers();
    return;
  }
  statusBar()->showMessage(tr("Reading %1…").arg(dir));
  ++pending_reads_;
  const std::uint64_t number = first_read_ + reads_.size();
  reads_.push_back({dir, remember});
  auto* watcher = new QFutureWatcher<std::pair<std::shared_ptr<const Trace>, QString>>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, number] {
    auto [trace, error] = watcher->result();
    watcher->deleteLater();
    PendingRead& r = reads_[static_cast<std::size_t>(number - first_read_)];
    r.done = true;
    r.trace = std::move(trace);
    r.error = std::move(error);
    addReadRuns();
  });
  watcher->setFuture(QtConcurrent::run([dir]() -> std::pair<std::shared_ptr<const Trace>, QString> {
    try {
      return {read_run_or_import(dir), QString()};  // a run directory, or a file to import
    } catch (const std::bad_alloc&) {
      return {nullptr, QStringLiteral("out of memory while reading the run directory")};
    } catch (const std::exception& e) {
      return {nullptr, QString::fromStdString(e.what())};
    } catch (...) {
      return {nullptr, QStringLiteral("an unknown error while reading the run directory")};
    }
  }));
}

void MainWindow::addReadRuns() {
  while (!reads_.empty() && reads_.front().done) {
    const PendingRead r = std::move(reads_.front());
    reads_.pop_front();
    ++first_read_;
    const bool last = --pending_reads_ == 0;
    if (!r.trace) {
      statusBar()->showMessage(tr("Cannot open %1").arg(r.dir), 8000);
      if (options_.error_dialogs) QMessageBox::warning(this, tr("Open run"), r.error);
      emit openFailed(r.dir, r.error);
    } else {
      const int row = runs_->add(r.trace, QFileInfo(r.dir).absoluteFilePath());
      if (r.remember) addRecent(r.dir);
      onRankRead(row);
      run_list_->setCurrentIndex(runs_->index(row));
      showRun(row);
      statusBar()->showMessage(tr("Opened %1").arg(r.dir), 5000);
      emit runAdded(row);
      emit runOpened(row);
    }
    if (last) {
      showLeftovers();
      emit readsDone();
    }
  }
}

void MainWindow::openRunDialog() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a run directory"), runs_dir_);
  if (!dir.isEmpty()) openRunDir(dir);
}

void MainWindow::showRun(int row) {
  if (row < 0 || row >= runs_->rowCount()) {
    current_ = -1;
    run_view_->setTrace(nullptr, {});
    analysis_->setCurrent({});
    refreshRunViews();
    return;
  }
  current_ = row;
  // A finished run's message (cancelled, not saved) is about that run: gone when another shows.
  if (message_row_ >= 0 && message_row_ != row) {
    panel_->showError({});
    message_row_ = -1;
  }
  const RunEntry& e = runs_->at(row);
  run_view_->setTrace(e.trace, e.label);
  analysis_->setCurrent(e);
  refreshRunViews();
}

void MainWindow::refreshRunViews() {
  compare_->setRuns(runs_->checked());
  analysis_->setRuns(runs_->runs());
  diff_->setRuns(runs_->runs(), current_);
  connectPlots();
}

void MainWindow::connectPlots() {
  for (PlotView* v : findChildren<PlotView*>())
    connect(v, &PlotView::activated, this, &MainWindow::onPlotActivated, Qt::UniqueConnection);
}

void MainWindow::onPlotActivated(QCustomPlot* plot) { last_plot_ = plot; }

void MainWindow::removeCurrentRun() {
  const int row = run_list_->currentIndex().isValid() ? run_list_->currentIndex().row() : current_;
  if (row < 0) return;
  runs_->remove(row);
  showRun(std::min(row, runs_->rowCount() - 1));
}

const RunEntry* MainWindow::current() const {
  if (current_ < 0 || current_ >= runs_->rowCount()) return nullptr;
  return &runs_->at(current_);
}

QCustomPlot* MainWindow::currentPlot() const {
  if (last_plot_ && last_plot_->isVisible()) return last_plot_;
  return run_view_->memory()->plot();
}

void MainWindow::exportCsv() {
  const RunEntry* e = current();
  if (!e) return;
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Export the CSV tables into"));
  if (dir.isEmpty()) return;
  try {
    const QStringList files = export_csv_tables(*e->trace, dir);
    statusBar()->showMessage(tr("Wrote %1 CSV tables to %2").arg(files.size()).arg(dir), 6000);
  } catch (const std::exception& ex) {
    QMessageBox::warning(this, tr("Export CSV"), QString::fromStdString(ex.what()));
  }
}

void MainWindow::exportChromeTrace() {
  const RunEntry* e = current();
  if (!e) return;
  const QString title = !ranksDirOf(*e).isEmpty() ? tr("Export the Chrome trace of every rank") : tr("Export the Chrome trace");
  const QString path = QFileDialog::getSaveFileName(this, title, "trace.json", tr("Chrome trace (*.json)"));
  if (path.isEmpty()) return;
  try {
    exportChromeTraceTo(path);
  } catch (const std::exception& ex) {
    QMessageBox::warning(this, tr("Export Chrome trace"), QString::fromStdString(ex.what()));
  }
}

void MainWindow::exportChromeTraceTo(const QString& path) {
  const RunEntry* e = current();
  if (!e) throw Error("no run is shown");
  const QString parent = ranksDirOf(*e);
  if (parent.isEmpty()) {
    export_chrome_trace(*e->trace, path);
    statusBar()->showMessage(tr("Wrote %1 (open it in Perfetto)").arg(path), 6000);
    return;
  }
  const auto traces = rankTraces(parent);
  std::vector<const Trace*> raw;
  for (const auto& t : traces) raw.push_back(t.get());
  const QString left_out = export_ranks_chrome_trace(ranks_dirs_.at(parent), raw, path);
  statusBar()->showMessage(left_out.isEmpty()
                               ? tr("Wrote %1: all %2 ranks (open it in Perfetto)").arg(path).arg(raw.size())
                               : tr("Wrote %1 without a rank: %2").arg(path, left_out.simplified()),
                           left_out.isEmpty() ? 6000 : 20000);
}

void MainWindow::exportPlot() {
  QCustomPlot* p = currentPlot();
  const QString path = QFileDialog::getSaveFileName(this, tr("Export the plot"), "plot.png",
                                                    tr("PNG image (*.png);;PDF document (*.pdf)"));
  if (path.isEmpty()) return;
  try {
    export_plot(p, path);
    statusBar()->showMessage(tr("Wrote %1").arg(path), 6000);
  } catch (const std::exception& ex) {
    QMessageBox::warning(this, tr("Export plot"), QString::fromStdString(ex.what()));
  }
}

void MainWindow::saveRunAs() {
  const RunEntry* e = current();
  if (!e) return;
  const QString dir = QFileDialog::getSaveFileName(this, tr("Save the run directory as"), runs_dir_);
  if (dir.isEmpty()) return;
  try {
    save_run_dir(*e->trace, dir, false);
    addRecent(dir);
    statusBar()->showMessage(tr("Saved %1").arg(dir), 6000);
  } catch (const std::exception& ex) {
    QMessageBox::warning(this, tr("Save run"), QString::fromStdString(ex.what()));
  }
}

bool MainWindow::saveScreenshot(const QString& path, QString* error) {
  const QImage image = grab().toImage();
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly) || !image.save(&f, "PNG") || !f.commit()) {
    if (error) *error = tr("cannot write %1").arg(path);
    return false;
  }
  // Where the memory plot is, in the image's pixels, for checks of what it shows.
  MemoryTimelineView* m = run_view_->memory();
  const double dpr = image.devicePixelRatio();
  const QRect area = m->plotArea();
  const QPoint tl = m->mapTo(this, area.topLeft());
  QJsonObject o;
  o["x"] = static_cast<int>(tl.x() * dpr);
  o["y"] = static_cast<int>(tl.y() * dpr);
  o["width"] = static_cast<int>(area.width() * dpr);
  o["height"] = static_cast<int>(area.height() * dpr);
  o["image_width"] = image.width();
  o["image_height"] = image.height();
  o["plotted_max_bytes"] = m->plottedMaximum();
  if (const RunEntry* e = current()) {
    o["peak_bytes"] = static_cast<double>(e->trace->peak_bytes);
    o["value_axis_max"] = m->plot()->yAxis->range().upper;
  }
  if (pages_->currentWidget() == ranks_view_) o["ranks"] = ranks_view_->screenshotGeometry(this, dpr);
  QSaveFile j(path + ".json");
  if (!j.open(QIODevice::WriteOnly) || j.write(QJsonDocument(o).toJson()) < 0 || !j.commit()) {
    if (error) *error = tr("cannot write %1.json").arg(path);
    return false;
  }
  return true;
}

}  // namespace remat::gui
