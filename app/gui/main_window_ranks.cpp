// Runs of several ranks in the main window: ranks.json read when the directory is opened, every
// rank-N/ read as a run of its own (labelled with the layout and the rank; only the rank a
// comparison takes, its peak rank, is checked for Compare), and the Ranks page (RanksView)
// showing them all. Picking a rank there shows its run view.
#include <QDir>
#include <QFileInfo>
#include <QListView>
#include <QMessageBox>
#include <QStatusBar>
#include <QTabWidget>

#include "main_window.h"
#include "views/ranks_view.h"
#include "views/run_view.h"

namespace remat::gui {

bool MainWindow::openRanksDir(const QString& dir, bool remember) {
  if (!is_ranks_dir(dir.toStdString())) return false;
  const QString abs = QFileInfo(dir).absoluteFilePath();
  RanksDir r;
  try {
    r = read_ranks_json(abs.toStdString());
  } catch (const std::exception& e) {
    const QString error = QString::fromStdString(e.what());
    statusBar()->showMessage(tr("Cannot open %1").arg(dir), 8000);
    if (options_.error_dialogs) QMessageBox::warning(this, tr("Open run"), error);
    emit openFailed(dir, error);
    return true;
  }
  ranks_dirs_[abs] = r;
  if (remember) addRecent(dir);
  pages_->setTabVisible(pages_->indexOf(ranks_view_), true);
  pages_->setCurrentWidget(ranks_view_);
  updateRanksView(abs);
  bool any = false;
  for (const auto& row : r.ranks) {
    const QString sub = QDir(abs).filePath(QString::fromStdString(row.dir));
    if (!QFileInfo::exists(sub + "/summary.json")) continue;  // a rank that left nothing: in ranks.json only
    any = true;
    openRunDirAs(sub, false);
  }
  if (!any) {
    statusBar()->showMessage(tr("%1: no rank left a run directory").arg(dir), 8000);
    if (pending_reads_ == 0) emit readsDone();
  }
  return true;
}

QString MainWindow::ranksDirOf(const RunEntry& e) const {
  if (e.dir.isEmpty()) return {};
  const QString parent = QFileInfo(e.dir).absolutePath();
  return ranks_dirs_.count(parent) ? parent : QString();
}

void MainWindow::onRankRead(int row) {
  const RunEntry& e = runs_->at(row);
  const QString parent = ranksDirOf(e);
  if (parent.isEmpty()) return;
  const auto it = ranks_dirs_.find(parent);
  const QString name = QFileInfo(e.dir).fileName();
  const int compared = compared_rank(it->second, std::nullopt, parent.toStdString());
  if (name != QString::fromStdString(it->second.ranks[static_cast<std::size_t>(compared)].dir))
    runs_->setChecked(row, false);  // a comparison takes the peak rank; check others by hand
  updateRanksView(parent);
}

void MainWindow::updateRanksView(const QString& dir) {
  const auto it = ranks_dirs_.find(dir);
  if (it == ranks_dirs_.end()) return;
  ranks_view_->setRanks(dir, it->second, rankTraces(dir));
}

std::vector<std::shared_ptr<const Trace>> MainWindow::rankTraces(const QString& dir) const {
  std::vector<std::shared_ptr<const Trace>> traces;
  const auto it = ranks_dirs_.find(dir);
  if (it == ranks_dirs_.end()) return traces;
  for (const auto& row : it->second.ranks) {
    const int k = runs_->findDir(QDir(dir).filePath(QString::fromStdString(row.dir)));
    traces.push_back(k >= 0 ? runs_->at(k).trace : nullptr);
  }
  return traces;
}

void MainWindow::showRank(const QString& dir, int rank) {
  const auto it = ranks_dirs_.find(dir);
  if (it == ranks_dirs_.end() || rank < 0 || rank >= it->second.world_size) return;
  const int row = runs_->findDir(QDir(dir).filePath(QString::fromStdString(it->second.ranks[static_cast<std::size_t>(rank)].dir)));
  if (row < 0) return;
  run_list_->setCurrentIndex(runs_->index(row));
  showRun(row);
  pages_->setCurrentWidget(run_view_);
}

}  // namespace remat::gui
