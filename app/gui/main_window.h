// The main window: the setup panel and the run list on the left; the timeline, compare and
// analysis pages in the middle; menus with keyboard shortcuts for the common actions; recent
// runs, the window layout and the theme kept with QSettings; run directories opened from the
// menu, from recent runs or dropped onto the window.
#pragma once
#include <QMainWindow>
#include <QPointer>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "core/plugin/registry.h"
#include "core/trace/ranks_dir.h"
#include "run_list.h"
#include "theme.h"

class QAction;
class QCustomPlot;
class QLabel;
class QListView;
class QMenu;
class QTabWidget;

namespace remat::gui {

class AnalysisView;
class DiffView;
class CompareView;
class RunController;
class RunPanel;
class RunView;
class StartPage;
class RanksView;

struct WindowOptions {
  QString runs_dir;              // where finished runs are saved ("" = the settings' or the default)
  bool save_runs = true;         // save every finished run as a run directory
  bool restore_settings = true;  // window geometry, theme, last choice
  bool error_dialogs = true;     // a run directory that cannot be read: a dialog (else the status bar)
};

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(const WindowOptions& options = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  RunPanel* runPanel() const { return panel_; }
  RunListModel* runs() const { return runs_; }
  QListView* runListView() const { return run_list_; }
  RunView* runView() const { return run_view_; }
  CompareView* compareView() const { return compare_; }
  AnalysisView* analysisView() const { return analysis_; }
  DiffView* diffView() const { return diff_; }
  RanksView* ranksView() const { return ranks_view_; }
  QTabWidget* pages() const { return pages_; }
  RunController* controller() const { return controller_; }
  const PolicyRegistry& registry() const { return registry_; }
  QString runsDir() const { return runs_dir_; }
  StartPage* startPage() const { return start_; }
  QMenu* recentMenu() const { return recent_menu_; }
  QStringList recentRuns() const;  // newest first; a sweep is one entry, its directory

  // Starts the run the panel describes; false (with the reason shown) when it cannot.
  bool startRun();
  void cancelRun();
  // Reads a run directory in the background and adds it to the list (runOpened or
  // openFailed); a sweep directory (run directories inside) opens each of its runs.
  void openRunDir(const QString& dir) { openRunDirAs(dir, true); }
  int pendingReads() const { return pending_reads_; }
  void showRun(int row);
  int currentRun() const { return current_; }
  // The plot File › Export plot writes: the one last clicked, else the memory timeline.
  QCustomPlot* currentPlot() const;
  // A PNG of the window and, next to it (<path>.json), the memory plot's area in its pixels.
  bool saveScreenshot(const QString& path, QString* error = nullptr);
  void setTheme(ThemeChoice t);
  // File › Export Chrome trace without the file dialog: the current run's trace, or every rank's
  // when it is a rank of a run of several that is open (what it wrote in the status bar). Throws
  // remat::Error when it cannot.
  void exportChromeTraceTo(const QString& path);

 signals:
  void runAdded(int row);   // a finished run or a run directory joined the list
  void runOpened(int row);  // ... a run directory
  void runFinished(int row);
  void runFailed(const QString& error);
  void openFailed(const QString& dir, const QString& error);
  void readsDone();  // every run directory asked for has been read (or refused)

 protected:
  void closeEvent(QCloseEvent* e) override;
  void dragEnterEvent(QDragEnterEvent* e) override;
  void dropEvent(QDropEvent* e) override;

 private:
  void buildMenus();
  void buildDocks();
  void restoreSettings();
  void saveSettings();
  void addRecent(const QString& dir);
  // remember = false: the run of a sweep, whose recent entry is the sweep directory.
  void openRunDirAs(const QString& dir, bool remember);
  void updateRecentMenu();
  // A run of several ranks (main_window_ranks.cpp): its ranks.json read, each rank opened as a
  // run (only the rank compared checked), the Ranks page showing them as they arrive.
  bool openRanksDir(const QString& dir, bool remember);
  void onRankRead(int row);
  void updateRanksView(const QString& dir);
  // The open run of several ranks `e` is a rank of (its directory, the key of ranks_dirs_), or
  // "" when it is none.
  QString ranksDirOf(const RunEntry& e) const;
  // The ranks of an open run of several as read so far (null: not read), in rank order.
  std::vector<std::shared_ptr<const Trace>> rankTraces(const QString& dir) const;
  void showRank(const QString& dir, int rank);
  void refreshRunViews();
  void connectPlots();
  void onPlotActivated(QCustomPlot* plot);
  void onRunFinished(std::shared_ptr<const Trace> trace, const QString& dir, const QString& save_error);
  void onRunFailed(const QString& error);
  void exportCsv();
  void exportChromeTrace();
  void exportPlot();
  void saveRunAs();
  void openRunDialog();
  void removeCurrentRun();
  void showShortcuts();
  void about();
  const RunEntry* current() const;

  WindowOptions options_;
  PolicyRegistry registry_;
  QString runs_dir_;
  RunListModel* runs_;
  RunController* controller_;
  RunPanel* panel_;
  QListView* run_list_;
  QTabWidget* pages_;
  RunView* run_view_;
  StartPage* start_ = nullptr;
  CompareView* compare_;
  AnalysisView* analysis_;
  DiffView* diff_;
  RanksView* ranks_view_;
  std::map<QString, RanksDir> ranks_dirs_;  // by absolute path: the runs of several ranks opened
  QMenu* recent_menu_ = nullptr;
  QLabel* status_label_;
  QPointer<QCustomPlot> last_plot_;
  int current_ = -1;
  int message_row_ = -1;  // the run the panel's message is about (-1: none)
  int pending_reads_ = 0;
  // The reads asked for, in that order: a read that finishes before one asked earlier waits for
  // it, so the runs of a sweep or ranks directory join the list in the directory's order.
  struct PendingRead {
    QString dir;
    bool remember = false;
    bool done = false;
    std::shared_ptr<const Trace> trace;  // null when it failed
    QString error;
  };
  std::deque<PendingRead> reads_;
  std::uint64_t first_read_ = 0;  // the number of reads_.front()
  void addReadRuns();  // the finished reads at the front of reads_, in order
  // Leftovers of interrupted writes next to the directories opened (rematlab-batch clean).
  QStringList leftovers_;
  void noteLeftovers(const QString& dir);
  void showLeftovers();
  ThemeChoice theme_ = ThemeChoice::System;
  QList<QAction*> theme_actions_;
};

}  // namespace remat::gui
