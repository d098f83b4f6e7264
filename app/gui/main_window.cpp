#include "main_window.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileDialog>
#include <QDragEnterEvent>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QListView>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPushButton>
#include <QSettings>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "core/trace/summary.h"
#include "import_open.h"
#include "run_controller.h"
#include "format.h"
#include "run_panel.h"
#include "shortcuts.h"
#include "start_page.h"
#include "views/ranks_view.h"
#include "views/analysis_view.h"
#include "views/compare_view.h"
#include "views/diff_view.h"
#include "views/ledger_view.h"
#include "views/memory_timeline_view.h"
#include "views/run_view.h"

namespace remat::gui {

namespace {
constexpr int kMaxRecent = 10;
}

MainWindow::MainWindow(const WindowOptions& options, QWidget* parent)
    : QMainWindow(parent), options_(options), runs_(new RunListModel(this)), status_label_(new QLabel(this)) {
  setWindowTitle("RematLab");
  setWindowIcon(app_icon());
  setAcceptDrops(true);
  registry_.load_dirs(PolicyRegistry::default_dirs());
  QSettings settings;
  runs_dir_ = !options_.runs_dir.isEmpty() ? options_.runs_dir
              : settings.contains("runsDir")
                  ? settings.value("runsDir").toString()
                  : QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + "/runs";

  controller_ = new RunController(registry_, this);
  panel_ = new RunPanel(registry_, this);
  panel_->setSaveRoot(options_.save_runs ? runs_dir_ : QString());

  pages_ = new QTabWidget(this);
  pages_->setDocumentMode(true);
  run_view_ = new RunView(this);
  start_ = new StartPage(run_view_);
  run_view_->setStartPage(start_);
  connect(start_, &StartPage::openRequested, this, &MainWindow::openRunDialog);
  connect(start_, &StartPage::recentChosen, this, &MainWindow::openRunDir);
  connect(start_, &StartPage::presetChosen, this, [this](const QString& name) {
    if (panel_->selectModel(name))
      statusBar()->showMessage(tr("%1 selected in the Setup panel: choose a policy and press Run (Ctrl+R)").arg(name), 6000);
  });
  compare_ = new CompareView(this);
  compare_->setRegistry(&registry_);
  connect(compare_, &CompareView::plotsRebuilt, this, &MainWindow::connectPlots);
  analysis_ = new AnalysisView(this);
  pages_->addTab(run_view_, tr("Timeline"));
  pages_->addTab(compare_, tr("Compare"));
  pages_->addTab(analysis_, tr("Analysis"));
  diff_ = new DiffView(this);
  pages_->addTab(diff_, tr("Diff"));
  ranks_view_ = new RanksView(this);
  pages_->addTab(ranks_view_, tr("Ranks"));
  pages_->setTabVisible(pages_->indexOf(ranks_view_), false);  // until a run of several ranks opens
  connect(ranks_view_, &RanksView::rankChosen, this, &MainWindow::showRank);
  setCentralWidget(pages_);
  buildDocks();
  buildMenus();
  statusBar()->addPermanentWidget(status_label_);
  if (!registry_.rejected().empty()) {
    QString msg;
    for (const auto& r : registry_.rejected())
      msg += QString::fromStdString(r.file) + ": " + QString::fromStdString(r.reason) + "\n";
    statusBar()->showMessage(tr("Some plugins were rejected (see the tooltip)"), 10000);
    statusBar()->setToolTip(msg.trimmed());
  }
  status_label_->setText(tr("%1 policies · runs saved to %2")
                             .arg(registry_.policies().size())
                             .arg(options_.save_runs ? short_path(runs_dir_) : tr("(not saved)")));
  if (options_.save_runs) status_label_->setToolTip(runs_dir_);

  connect(panel_, &RunPanel::runRequested, this, &MainWindow::startRun);
  connect(panel_, &RunPanel::cancelRequested, this, &MainWindow::cancelRun);
  connect(controller_, &RunController::progress, panel_, &RunPanel::setProgress);
  connect(controller_, &RunController::finished, this, &MainWindow::onRunFinished);
  connect(controller_, &RunController::failed, this, &MainWindow::onRunFailed);
  connect(runs_, &RunListModel::checkedChanged, this, &MainWindow::refreshRunViews);
  connect(run_view_->memory(), &MemoryTimelineView::tensorsPicked, this,
          [this](const QList<QPair<int, QString>>& tensors, qint64 t_ns) {
            const int n = analysis_->ledger()->selectTensors(tensors, t_ns);
            statusBar()->showMessage(tr("%1 ledger rows selected (Analysis page, Ctrl+3)").arg(n), 4000);
          });
  // A run whose views could not be built (the error of core, on the worker): as a refused run directory.
  connect(run_view_, &RunView::loadFailed, this, [this](const QString& error) {
    statusBar()->showMessage(tr("Cannot show the run: %1").arg(error), 8000);
    if (options_.error_dialogs) QMessageBox::warning(this, tr("Show run"), error);
  });
  connectPlots();
  resize(1500, 950);
  if (options_.restore_settings) restoreSettings();
  else updateRecentMenu();
}

MainWindow::~MainWindow() {
  // The panel's prediction worker and the controller's run thread use registry_, a member that
  // is destroyed before QObject deletes the children: end them here, while it still exists.
  delete panel_;
  delete controller_;
}

void MainWindow::buildDocks() {
  auto* setup = new QDockWidget(tr("Setup"), this);
  setup->setObjectName("setupDock");
  setup->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  // The panel scrolls its form itself and keeps Run, Cancel and the progress in sight.
  panel_->setMinimumWidth(panel_->sizeHint().width());
  setup->setWidget(panel_);
  addDockWidget(Qt::LeftDockWidgetArea, setup);

  auto* list_dock = new QDockWidget(tr("Runs"), this);
  list_dock->setObjectName("runsDock");
  list_dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  auto* box = new QWidget(list_dock);
  auto* l = new QVBoxLayout(box);
  l->setContentsMargins(6, 2, 6, 6);
  run_list_ = new QListView(box);
  run_list_->setModel(runs_);
  run_list_->setSpacing(1);
  run_list_->setAlternatingRowColors(true);
  run_list_->setToolTip(tr("Click a run to show it; check runs to compare them"));
  auto* hint = new QLabel(tr("Checked runs are compared. Drop run directories here."), box);
  hint->setWordWrap(true);
  hint->setForegroundRole(QPalette::PlaceholderText);
  auto* buttons = new QHBoxLayout;
  auto* open = new QPushButton(tr("Open…"), box);
  auto* remove = new QPushButton(tr("Remove"), box);
  buttons->addWidget(open);
  buttons->addWidget(remove);
  l->addWidget(run_list_, 1);
  l->addWidget(hint);
  l->addLayout(buttons);
  list_dock->setWidget(box);
  addDockWidget(Qt::LeftDockWidgetArea, list_dock);
  // The setup form gets most of the height (it scrolls when it needs more), the run list the rest.
  resizeDocks({setup, list_dock}, {3, 1}, Qt::Vertical);
  connect(open, &QPushButton::clicked, this, &MainWindow::openRunDialog);
  connect(remove, &QPushButton::clicked, this, &MainWindow::removeCurrentRun);
  connect(run_list_->selectionModel(), &QItemSelectionModel::currentChanged, this,
          [this](const QModelIndex& i) {
            if (i.isValid()) showRun(i.row());
          });
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  auto add = [this](QMenu* m, const QString& text, const QKeySequence& key, auto slot) {
    QAction* a = m->addAction(text);
    if (!key.isEmpty()) a->setShortcut(key);
    a->setShortcutContext(Qt::WindowShortcut);
    connect(a, &QAction::triggered, this, slot);
    return a;
  };
  add(file, tr("&Open run directory…"), shortcut_key("open"), &MainWindow::openRunDialog);
  add(file, tr("Open PyTorch &snapshot or trace…"), shortcut_key("open_import"), [this] {
    const QString path = pick_import_file(this, runs_dir_);
    if (!path.isEmpty()) openRunDir(path);
  });
  recent_menu_ = file->addMenu(tr("Open &recent"));
  add(file, tr("Open &model config…"), shortcut_key("open_model"), [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a model"), QString(),
                                                      tr("Model or Hugging Face config (*.json);;All files (*)"));
    if (!path.isEmpty()) panel_->openModelFile(path);
  });
  file->addSeparator();
  add(file, tr("&Save run as…"), shortcut_key("save"), &MainWindow::saveRunAs);
  add(file, tr("Export CSV &tables…"), shortcut_key("export_csv"), &MainWindow::exportCsv);
  add(file, tr("Export &Chrome trace…"), shortcut_key("export_chrome"), &MainWindow::exportChromeTrace);
  add(file, tr("Export &plot (PNG, PDF)…"), shortcut_key("export_plot"), &MainWindow::exportPlot);
  file->addSeparator();
  add(file, tr("&Quit"), shortcut_key("quit"), &QWidget::close);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  add(run, tr("&Run"), shortcut_key("run"), &MainWindow::startRun);
  add(run, tr("&Cancel"), shortcut_key("cancel"), &MainWindow::cancelRun);
  run->addSeparator();
  add(run, tr("Re&move run from the list"), shortcut_key("remove_run"), &MainWindow::removeCurrentRun);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  add(view, tr("&Timeline"), shortcut_key("page_timeline"), [this] { pages_->setCurrentIndex(0); });
  add(view, tr("&Compare"), shortcut_key("page_compare"), [this] { pages_->setCurrentIndex(1); });
  add(view, tr("&Analysis"), shortcut_key("page_analysis"), [this] { pages_->setCurrentIndex(2); });
  add(view, tr("&Diff"), shortcut_key("page_diff"), [this] { pages_->setCurrentWidget(diff_); });
  view->addSeparator();
  add(view, tr("Zoom &in"), shortcut_key("zoom_in"), [this] { run_view_->zoom(0.5); });
  add(view, tr("Zoom &out"), shortcut_key("zoom_out"), [this] { run_view_->zoom(2.0); });
  add(view, tr("&Reset zoom"), shortcut_key("zoom_reset"), [this] {
    run_view_->resetZoom();
    compare_->resetZoom();
  });
  QAction* norm = add(view, tr("&Normalize compared time axes"), shortcut_key("normalize"), [this](bool on) {
    compare_->setTimeMode(on ? TimeMode::Normalized : TimeMode::Absolute);
  });
  norm->setCheckable(true);
  QAction* overlay = add(view, tr("O&verlay compared runs"), shortcut_key("overlay"),
                         [this](bool on) { compare_->setOverlay(on); });
  overlay->setCheckable(true);
  view->addSeparator();
  QMenu* theme = view->addMenu(tr("T&heme"));
  auto* group = new QActionGroup(this);
  for (ThemeChoice t : {ThemeChoice::System, ThemeChoice::Light, ThemeChoice::Dark}) {
    QAction* a = theme->addAction(t == ThemeChoice::System ? tr("&System") : t == ThemeChoice::Light ? tr("&Light") : tr("&Dark"));
    a->setCheckable(true);
    a->setData(to_string(t));
    group->addAction(a);
    theme_actions_ << a;
    connect(a, &QAction::triggered, this, [this, t] { setTheme(t); });
  }
  theme_actions_.front()->setChecked(true);

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  add(help, tr("&Keyboard shortcuts"), shortcut_key("help"), &MainWindow::showShortcuts);
  add(help, tr("&About RematLab"), QKeySequence(), &MainWindow::about);
}

void MainWindow::setTheme(ThemeChoice t) {
  theme_ = t;
  for (QAction* a : theme_actions_) a->setChecked(a->data().toString() == to_string(t));
  apply_theme(*qApp, t);
}

void MainWindow::restoreSettings() {
  QSettings s;
  if (s.contains("geometry")) restoreGeometry(s.value("geometry").toByteArray());
  if (s.contains("windowState")) restoreState(s.value("windowState").toByteArray());
  setTheme(theme_from_string(s.value("theme", "system").toString()));
  const QString model = s.value("lastModel").toString();
  if (!model.isEmpty()) panel_->selectModel(model);
  const QString policy = s.value("lastPolicy").toString();
  if (!policy.isEmpty()) panel_->selectPolicy(policy);
  updateRecentMenu();
}

void MainWindow::saveSettings() {
  if (!options_.restore_settings) return;
  QSettings s;
  s.setValue("geometry", saveGeometry());
  s.setValue("windowState", saveState());
  s.setValue("theme", to_string(theme_));
  s.setValue("lastPolicy", panel_->policyName());
  const QString m = panel_->modelName();
  if (panel_->modelBox()->currentData().toString().startsWith("preset:")) s.setValue("lastModel", m);
}

void MainWindow::addRecent(const QString& dir) {
  if (dir.isEmpty()) return;
  QSettings s;
  QStringList recent = s.value("recentRuns").toStringList();
  const QString abs = QFileInfo(dir).absoluteFilePath();
  recent.removeAll(abs);
  recent.prepend(abs);
  while (recent.size() > kMaxRecent) recent.removeLast();
  s.setValue("recentRuns", recent);
  updateRecentMenu();
}

QStringList MainWindow::recentRuns() const { return QSettings().value("recentRuns").toStringList(); }

void MainWindow::updateRecentMenu() {
  const QStringList recent = recentRuns();
  if (start_) start_->setRecent(recent);
  if (!recent_menu_) return;
  recent_menu_->clear();
  recent_menu_->setToolTipsVisible(true);
  for (int i = 0; i < recent.size(); ++i) {
    // The path, shortened (the full one in the tooltip); "&" would be read as a mnemonic.
    QString shown = short_path(recent[i]);
    shown.replace("&", "&&");
    QAction* a = recent_menu_->addAction(QString("&%1 %2").arg((i + 1) % 10).arg(shown));
    a->setToolTip(recent[i]);
    a->setData(recent[i]);
    const QString dir = recent[i];
    connect(a, &QAction::triggered, this, [this, dir] { openRunDir(dir); });
  }
  if (recent.isEmpty()) recent_menu_->addAction(tr("(none yet)"))->setEnabled(false);
  recent_menu_->addSeparator();
  connect(recent_menu_->addAction(tr("&Clear")), &QAction::triggered, this, [this] {
    QSettings().remove("recentRuns");
    updateRecentMenu();
  });
}

void MainWindow::closeEvent(QCloseEvent* e) {
  if (controller_->running()) controller_->cancel();
  saveSettings();
  QMainWindow::closeEvent(e);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
  for (const QUrl& u : e->mimeData()->urls()) {
    if (!u.isLocalFile()) continue;
    QFileInfo info(u.toLocalFile());
    // A snapshot or profiler trace is imported; a dropped summary.json (or any file of a run
    // directory) opens its directory.
    const bool file = !info.isDir() && is_importable_file(info.absoluteFilePath()) &&
                      !QFileInfo::exists(info.absolutePath() + "/summary.json");
    openRunDir(file || info.isDir() ? info.absoluteFilePath() : info.absolutePath());
  }
  e->acceptProposedAction();
}

void MainWindow::showShortcuts() {
  QMessageBox::information(this, tr("Keyboard shortcuts"), shortcuts_html());
}

void MainWindow::about() {
  QMessageBox::about(this, tr("About RematLab"),
                     tr("<b>RematLab</b> %1 (%2)<br>What activation checkpointing really costs: real training "
                        "steps under swappable policies, every allocation and every op recorded.")
                         .arg(QString::fromStdString(program_version()), QString::fromStdString(program_commit())));
}

}  // namespace remat::gui
