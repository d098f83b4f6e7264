#include "run_panel.h"

#include <algorithm>
#include <QComboBox>
#include <QEvent>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QThread>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "core/backend/backend_factory.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/null/cuda_target.h"
#include "core/graph/block_graph.h"
#include "core/model/model_source.h"
#include "core/util/paths.h"
#include "format.h"
#include "model_editor.h"
#include "model_import_dialog.h"
#include "model_info.h"
#include "param_editor.h"

namespace remat::gui {

namespace {

constexpr int kFamilyHeaderRole = Qt::UserRole + 1;

QLabel* small_label(QWidget* parent) {
  auto* l = new QLabel(parent);
  l->setWordWrap(true);
  QFont f = l->font();
  f.setPointSizeF(f.pointSizeF() * 0.92);
  l->setFont(f);
  return l;
}

}  // namespace

RunPanel::RunPanel(const PolicyRegistry& registry, QWidget* parent)
    : QWidget(parent),
      registry_(registry),
      mirror_(std::make_unique<CpuBackend>(1)),
      cuda_mirror_(std::make_unique<CudaTarget>()),
      models_(new QComboBox(this)),
      open_model_(new QToolButton(this)),
      fields_toggle_(new QToolButton(this)),
      editor_(new ModelEditor(this)),
      model_error_(small_label(this)),
      policies_(new QComboBox(this)),
      policy_help_(small_label(this)),
      params_(new ParamEditor(this)),
      budget_(new QLineEdit(this)),
      costs_(new QLineEdit(this)),
      costs_browse_(new QToolButton(this)),
      device_(new QComboBox(this)),
      steps_(new QSpinBox(this)),
      warmup_(new QSpinBox(this)),
      seed_(new QSpinBox(this)),
      threads_(new QSpinBox(this)),
      prediction_(small_label(this)),
      run_(new QPushButton(tr("&Run"), this)),
      cancel_(new QPushButton(tr("Cancel"), this)),
      progress_(new QProgressBar(this)),
      status_(small_label(this)),
      error_(small_label(this)),
      debounce_(new QTimer(this)) {
  // Model.
  fillModelBox();
  models_->setToolTip(tr("A preset from share/rematlab/presets (grouped by family), or your own fields"));
  open_model_->setText(tr("Open…"));
  open_model_->setToolTip(tr("Open a model JSON or a Hugging Face config.json"));
  fields_toggle_->setText(tr("Fields"));
  fields_toggle_->setCheckable(true);
  fields_toggle_->setToolTip(tr("Show the model's fields to edit them"));
  model_error_->setStyleSheet("color: #d62728;");
  model_error_->setVisible(false);
  auto* model_box = new QGroupBox(tr("Model"), this);
  auto* ml = new QVBoxLayout(model_box);
  auto* mrow = new QHBoxLayout;
  mrow->addWidget(models_, 1);
  mrow->addWidget(fields_toggle_);
  mrow->addWidget(open_model_);
  ml->addLayout(mrow);
  ml->addWidget(editor_);
  ml->addWidget(model_error_);
  editor_->setVisible(false);

  // Policy.
  for (const auto& lp : registry_.policies()) {
    // Declarations read when the plugin was probed: listing never calls into a plugin.
    policies_->addItem(QString::fromStdString(lp.name), QString::fromStdString(lp.name));
    policies_->setItemData(policies_->count() - 1, QString::fromStdString(lp.description), Qt::ToolTipRole);
  }
  budget_->setPlaceholderText(tr("optional, e.g. 2MiB"));
  budget_->setToolTip(tr("Activation bytes the policy may use (--memory-budget): 4096, 512KiB, 2MiB, 1.5GiB"));
  policy_help_->setForegroundRole(QPalette::PlaceholderText);
  auto* policy_box = new QGroupBox(tr("Policy"), this);
  auto* pl = new QVBoxLayout(policy_box);
  pl->addWidget(policies_);
  pl->addWidget(policy_help_);
  pl->addWidget(params_);
  auto* bf = new QFormLayout;
  bf->setContentsMargins(0, 0, 0, 0);
  bf->addRow(tr("Activation budget"), budget_);
  budget_form_ = bf;
  costs_->setPlaceholderText(tr("FLOPs"));
  costs_->setClearButtonEnabled(true);
  costs_->setToolTip(tr("Step costs the planner weighs (--costs-from): FLOPs, or the step times "
                        "measured in a run directory of the same model (e.g. a run of none)"));
  costs_browse_->setText(tr("From run…"));
  costs_browse_->setToolTip(tr("Plan with the step times measured in a run directory"));
  auto* crow = new QHBoxLayout;
  crow->addWidget(costs_, 1);
  crow->addWidget(costs_browse_);
  bf->addRow(tr("Step costs"), crow);
  pl->addLayout(bf);

  // Run settings.
  device_->addItem("cpu", "cpu");
  std::string why;
  if (cuda_available(&why)) device_->addItem("cuda", "cuda");
  else device_->setToolTip(tr("CUDA is not offered here: %1").arg(QString::fromStdString(why)));
  steps_->setRange(1, 1000000);
  steps_->setValue(3);
  steps_->setToolTip(tr("Counted steps; the timelines show the last one"));
  warmup_->setRange(0, 1000000);
  warmup_->setValue(1);
  warmup_->setToolTip(tr("Steps run first and not counted"));
  seed_->setRange(0, std::numeric_limits<int>::max());
  seed_->setToolTip(tr("Seed of weights, batches and dropout"));
  threads_->setRange(1, 256);
  threads_->setValue(std::clamp(QThread::idealThreadCount(), 1, 8));
  threads_->setToolTip(tr("CPU threads (OpenBLAS and our ops)"));
  auto* run_box = new QGroupBox(tr("Run"), this);
  auto* rf = new QFormLayout(run_box);
  rf->addRow(tr("Device"), device_);
  auto* sw = new QHBoxLayout;
  sw->addWidget(steps_);
  sw->addWidget(new QLabel(tr("warmup"), this));
  sw->addWidget(warmup_);
  rf->addRow(tr("Steps"), sw);
  auto* st = new QHBoxLayout;
  st->addWidget(seed_);
  st->addWidget(new QLabel(tr("threads"), this));
  st->addWidget(threads_);
  rf->addRow(tr("Seed"), st);

  // Prediction, buttons, progress.
  prediction_->setTextFormat(Qt::RichText);
  prediction_->setFrameShape(QFrame::StyledPanel);
  prediction_->setMargin(6);
  prediction_->setMinimumHeight(prediction_->fontMetrics().height() * 3);
  run_->setDefault(true);
  run_->setToolTip(tr("Run the chosen model and policy (Ctrl+R)"));
  cancel_->setToolTip(tr("Stop the run between two ops (Esc)"));
  cancel_->setEnabled(false);
  progress_->setRange(0, 1000);
  progress_->setValue(0);
  progress_->setTextVisible(false);
  progress_->setMaximumHeight(8);
  error_->setStyleSheet("color: #d62728;");
  error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  error_->setVisible(false);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(run_, 1);
  buttons->addWidget(cancel_);

  // The choice scrolls; Run, Cancel, the progress and the messages stay pinned under it.
  form_ = new QWidget(this);
  auto* fl = new QVBoxLayout(form_);
  fl->setContentsMargins(6, 6, 6, 0);
  for (QWidget* w : std::initializer_list<QWidget*>{model_box, policy_box, run_box, prediction_}) {
    w->setParent(form_);
    fl->addWidget(w);
  }
  fl->addStretch(1);
  scroll_ = new QScrollArea(this);
  scroll_->setWidget(form_);
  scroll_->setWidgetResizable(true);
  scroll_->setFrameShape(QFrame::NoFrame);
  scroll_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* pinned = new QVBoxLayout;
  pinned->setContentsMargins(6, 4, 6, 6);
  pinned->addLayout(buttons);
  pinned->addWidget(progress_);
  pinned->addWidget(status_);
  pinned->addWidget(error_);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  l->setSpacing(0);
  l->addWidget(scroll_, 1);
  l->addLayout(pinned);

  debounce_->setSingleShot(true);
  debounce_->setInterval(120);
  connect(debounce_, &QTimer::timeout, this, &RunPanel::startPrediction);
  connect(&watcher_, &QFutureWatcher<PredictionOutcome>::finished, this, &RunPanel::onPrediction);
  connect(models_, &QComboBox::currentIndexChanged, this, &RunPanel::onModelChosen);
  connect(fields_toggle_, &QToolButton::toggled, editor_, &QWidget::setVisible);
  connect(open_model_, &QToolButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a model"), QString(),
                                                      tr("Model or Hugging Face config (*.json);;All files (*)"));
    if (!path.isEmpty()) openModelFile(path);
  });
  connect(editor_, &ModelEditor::edited, this, [this] {
    // The edited fields are the "custom" entry, named after the model they came from.
    filling_ = true;
    const int custom = models_->findData("custom");
    models_->setItemText(custom, editor_->modified() ? modelName() : tr("custom"));
    models_->setCurrentIndex(custom);
    filling_ = false;
    model_error_->setVisible(false);
    if (!editor_->isValid()) fields_toggle_->setChecked(true);
  });
  connect(editor_, &ModelEditor::changed, this, &RunPanel::onChoiceChanged);
  connect(policies_, &QComboBox::currentIndexChanged, this, &RunPanel::onPolicyChosen);
  connect(params_, &ParamEditor::changed, this, &RunPanel::onChoiceChanged);
  connect(budget_, &QLineEdit::textChanged, this, &RunPanel::onChoiceChanged);
  connect(costs_, &QLineEdit::textChanged, this, &RunPanel::onChoiceChanged);
  connect(costs_browse_, &QToolButton::clicked, this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Step times from a run"), costs_->text());
    if (!dir.isEmpty()) costs_->setText(dir);
  });
  connect(run_, &QPushButton::clicked, this, &RunPanel::runRequested);
  connect(cancel_, &QPushButton::clicked, this, &RunPanel::cancelRequested);

  int first = models_->findData("preset:tiny");
  for (int i = 0; first < 0 && i < models_->count(); ++i)
    if (models_->itemData(i).toString().startsWith("preset:")) first = i;
  models_->setCurrentIndex(first >= 0 ? first : models_->findData("custom"));
  onModelChosen(models_->currentIndex());
  const int none = policies_->findData("none");
  if (none >= 0 && policies_->currentIndex() != none) policies_->setCurrentIndex(none);
  else onPolicyChosen();
}

RunPanel::~RunPanel() { watcher_.waitForFinished(); }

bool RunPanel::budgetShown(const LoadedPolicy* p) { return p && p->takes_memory_budget; }

QSize RunPanel::sizeHint() const {
  // As wide as the form, so the scroll area never cuts a field.
  const QSize h = QWidget::sizeHint();
  if (!form_ || !scroll_) return h;
  return {std::max(h.width(), form_->sizeHint().width() + scroll_->verticalScrollBar()->sizeHint().width()),
          h.height()};
}

void RunPanel::fillModelBox() {
  // A header per family (not selectable), its presets under it; then custom and opened files.
  auto* model = qobject_cast<QStandardItemModel*>(models_->model());
  QString family;
  for (const PresetInfo& p : preset_catalogue()) {
    if (p.family != family) {
      family = p.family;
      auto* header = new QStandardItem(family);
      header->setFlags(Qt::NoItemFlags);
      QFont f = models_->font();
      f.setBold(true);
      header->setFont(f);
      header->setToolTip(tr("Presets of the %1 family").arg(family));
      header->setData(true, kFamilyHeaderRole);
      model->appendRow(header);
    }
    models_->addItem(p.name, "preset:" + p.name);
    const QString tip = p.error.isEmpty() ? (p.description.isEmpty() ? QString() : p.description + "\n") +
                                                p.family + " · " + p.sizes
                                          : tr("Cannot be read: %1").arg(p.error);
    models_->setItemData(models_->count() - 1, tip, Qt::ToolTipRole);
  }
  models_->insertSeparator(models_->count());
  models_->addItem(tr("custom"), "custom");
  models_->setItemData(models_->count() - 1, tr("The fields as you edit them"), Qt::ToolTipRole);
  colourFamilyHeaders();
}

void RunPanel::colourFamilyHeaders() {
  // Headers are disabled items, which the style greys out: drawn in the text colour instead,
  // and again when the theme changes the palette.
  auto* model = qobject_cast<QStandardItemModel*>(models_->model());
  for (int i = 0; i < model->rowCount(); ++i)
    if (QStandardItem* it = model->item(i); it && it->data(kFamilyHeaderRole).toBool())
      it->setForeground(palette().brush(QPalette::Active, QPalette::Text));
}

void RunPanel::changeEvent(QEvent* e) {
  if (e->type() == QEvent::PaletteChange) colourFamilyHeaders();
  QWidget::changeEvent(e);
}

void RunPanel::onModelChosen(int index) {
  if (filling_ || index < 0) return;
  const QString data = models_->itemData(index).toString();
  model_error_->setVisible(false);
  if (data != "custom") models_->setItemText(models_->findData("custom"), tr("custom"));
  if (data == "custom") {
    fields_toggle_->setChecked(true);
    return;
  }
  try {
    ModelConfig m;
    if (data.startsWith("preset:")) m = resolve_model(data.mid(7).toStdString());
    else if (data.startsWith("file:")) m = load_model_file(data.mid(5).toStdString());
    editor_->setConfig(m);
  } catch (const std::exception& e) {
    model_error_->setText(QString::fromStdString(e.what()));
    model_error_->setVisible(true);
  }
}

bool RunPanel::selectModel(const QString& preset) {
  const int i = models_->findData("preset:" + preset);
  if (i < 0) return false;
  if (models_->currentIndex() == i) onModelChosen(i);
  else models_->setCurrentIndex(i);
  return true;
}

void RunPanel::useModelFile(const QString& path, const ModelConfig& m) {
  const QString key = "file:" + path;
  int i = models_->findData(key);
  filling_ = true;
  if (i < 0) {
    models_->addItem(QString::fromStdString(m.name) + " (" + QFileInfo(path).fileName() + ")", key);
    i = models_->count() - 1;
    models_->setItemData(i, model_family(m) + " · " + model_sizes(m) + "\n" + path, Qt::ToolTipRole);
  }
  models_->setCurrentIndex(i);
  filling_ = false;
  model_error_->setVisible(false);
  editor_->setConfig(m);
}

bool RunPanel::loadModelFile(const QString& path, QString* error) {
  try {
    useModelFile(path, load_model_file(path.toStdString()));
    return true;
  } catch (const std::exception& e) {
    filling_ = false;
    const QString msg = tr("Cannot use %1: %2").arg(QFileInfo(path).fileName(), QString::fromStdString(e.what()));
    model_error_->setText(msg);
    model_error_->setVisible(true);
    if (error) *error = msg;
    return false;
  }
}

ModelImportDialog* RunPanel::openModelFile(const QString& path) {
  const ModelImport imported = import_model_file(path);
  auto* d = new ModelImportDialog(imported, this);
  d->setAttribute(Qt::WA_DeleteOnClose);
  d->setWindowModality(Qt::WindowModal);
  if (imported.ok) {
    connect(d, &QDialog::accepted, this, [this, path, m = imported.config] { useModelFile(path, m); });
  } else {
    model_error_->setText(tr("Cannot use %1: %2 (listed in the dialog)")
                              .arg(QFileInfo(path).fileName(),
                                   imported.problems.size() == 1 ? tr("1 problem")
                                                                 : tr("%1 problems").arg(imported.problems.size())));
    model_error_->setVisible(true);
  }
  d->open();
  return d;
}

void RunPanel::onPolicyChosen() {
  const LoadedPolicy* p = registry_.find(policyName().toStdString());
  params_->setTensorNames({});
  if (p) {
    policy_help_->setText(QString::fromStdString(p->description));
    params_->setParams(p->params);
  } else {
    policy_help_->setText(tr("No policy plugins were found: check the plugin directory or REMAT_PLUGIN_PATH."));
    params_->setParams({});
  }
  // The budget row exists only for the policies that plan to it.
  budget_form_->setRowVisible(budget_, budgetShown(p));
  onChoiceChanged();
}

bool RunPanel::selectPolicy(const QString& name) {
  const int i = policies_->findData(name);
  if (i < 0) return false;
  policies_->setCurrentIndex(i);
  return true;
}

bool RunPanel::setPolicyParam(const QString& name, const QString& value) { return params_->setValue(name, value); }
void RunPanel::setMemoryBudget(const QString& text) { budget_->setText(text); }
void RunPanel::setCostsFrom(const QString& dir) { costs_->setText(dir); }
void RunPanel::setSteps(int steps) { steps_->setValue(steps); }
void RunPanel::setWarmup(int warmup) { warmup_->setValue(warmup); }
void RunPanel::setSeed(int seed) { seed_->setValue(seed); }

bool RunPanel::setDevice(const QString& device) {
  const int i = device_->findData(device);
  if (i < 0) return false;
  device_->setCurrentIndex(i);
  return true;
}

QString RunPanel::modelName() const { return QString::fromStdString(editor_->config().name); }
QString RunPanel::policyName() const { return policies_->currentData().toString(); }

std::optional<RunRequest> RunPanel::request(QString* why) const {
  auto fail = [why](const QString& w) -> std::optional<RunRequest> {
    if (why) *why = w;
    return std::nullopt;
  };
  if (!editor_->isValid()) return fail(editor_->error());
  if (policyName().isEmpty()) return fail(tr("no policy is loaded"));
  RunRequest r;
  r.model = editor_->config();
  r.policy.name = policyName().toStdString();
  r.policy.params = params_->values();
  const LoadedPolicy* chosen = registry_.find(r.policy.name);
  const QString b = budget_->text().trimmed();
  if (!b.isEmpty() && budgetShown(chosen)) {  // only the policies that plan to it
    try {
      r.memory_budget = parse_bytes("memory-budget", b.toStdString());
    } catch (const std::exception& e) {
      return fail(QString::fromStdString(e.what()));
    }
  }
  r.costs_from = costs_->text().trimmed().toStdString();
  r.device = device_->currentData().toString().toStdString();
  r.steps = steps_->value();
  r.warmup = warmup_->value();
  r.seed = static_cast<std::uint64_t>(seed_->value());
  r.threads = threads_->value();
  r.save_root = save_root_;
  return r;
}

void RunPanel::onChoiceChanged() {
  // Names parameters offer this model's saved tensors.
  if (editor_->isValid()) {
    std::vector<std::string> names;
    try {
      BlockGraph g(editor_->config());
      for (int i = 0; i < g.table_count(); ++i)  // every table's (dense and expert layers differ)
        for (const auto& n : g.table(i).saved_names())
          if (n != "block.in" && std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    } catch (const std::exception&) {
    }
    params_->setTensorNames(names);
  }
  pending_ = true;
  ++generation_;
  debounce_->start();
  updateRunEnabled();
  emit choiceChanged();
}

void RunPanel::startPrediction() {
  if (watcher_.isRunning()) {  // the newer choice is predicted when this one ends
    debounce_->start();
    return;
  }
  QString why;
  auto req = request(&why);
  const int gen = generation_;
  if (!req) {
    last_ = {gen, false, why, {}, 0};
    pending_ = false;
    prediction_->setText("<span style='color:#d62728'>" + why.toHtmlEscaped() + "</span>");
    updateRunEnabled();
    return;
  }
  const PolicyRegistry* reg = &registry_;
  const Backend* mirror = req->device == "cpu" ? mirror_.get() : cuda_mirror_.get();
  watcher_.setFuture(QtConcurrent::run([reg, mirror, gen, r = *req]() {
    PredictionOutcome o;
    o.generation = gen;
    try {
      Schedule s = plan_request(*reg, r);
      o.actions = s.actions.size();
      o.prediction = simulate(r.model, s, mirror);
      o.ok = true;
    } catch (const std::bad_alloc&) {
      o.error = QStringLiteral("out of memory while predicting this run");
    } catch (const std::exception& e) {
      o.error = QString::fromStdString(e.what());
    } catch (...) {
      o.error = QStringLiteral("an unknown error while predicting this run");
    }
    return o;
  }));
}

void RunPanel::onPrediction() {
  PredictionOutcome o = watcher_.result();
  if (o.generation != generation_) {  // the choice changed meanwhile
    debounce_->start();
    return;
  }
  last_ = o;
  pending_ = false;
  if (!o.ok) {
    prediction_->setText("<span style='color:#d62728'>" + o.error.toHtmlEscaped() + "</span>");
  } else {
    const Prediction& p = o.prediction;
    const double fl = static_cast<double>(p.flops.total());
    prediction_->setText(
        tr("Predicted peak <b>%1</b><br>static %2 · activations %3%4<br>FLOPs %5 (recompute %6) · %7 block forwards")
            .arg(human_bytes(static_cast<double>(p.peak_bytes)), human_bytes(static_cast<double>(p.static_bytes)),
                 human_bytes(static_cast<double>(p.activation_peak_bytes)),
                 (p.host_peak_bytes ? " · host " + human_bytes(static_cast<double>(p.host_peak_bytes)) : QString()) +
                     (p.reserved_bytes ? tr(" · CUDA reserves %1").arg(human_bytes(static_cast<double>(p.reserved_bytes)))
                                       : QString()),
                 human_flops(fl), human_flops(static_cast<double>(p.flops.recompute)))
            .arg(p.block_forwards));
  }
  updateRunEnabled();
}

void RunPanel::updateRunEnabled() {
  QString why;
  const bool ok = request(&why).has_value() && (pending_ || last_.ok);
  run_->setEnabled(!running_ && ok);
  run_->setToolTip(ok ? tr("Run the chosen model and policy (Ctrl+R)") : why);
  if (!editor_->isValid()) {
    fields_toggle_->setChecked(true);
    prediction_->setText("<span style='color:#d62728'>" + tr("The model is not valid: %1").arg(editor_->error().toHtmlEscaped()) + "</span>");
  }
}

void RunPanel::setRunning(bool running) {
  running_ = running;
  cancel_->setEnabled(running);
  if (running) {
    progress_->setValue(0);
    status_->setText(tr("Starting…"));
    showError({});
  }
  updateRunEnabled();
}

void RunPanel::setProgress(double fraction, const QString& what) {
  progress_->setValue(static_cast<int>(fraction * 1000));
  status_->setText(what);
}

void RunPanel::showError(const QString& message) {
  error_->setText(message);
  error_->setVisible(!message.isEmpty());
}

QString RunPanel::errorText() const { return error_->text(); }

}  // namespace remat::gui
