// The setup panel: pick a model (a preset, listed under its family; edited fields; or a model /
// Hugging Face config.json from disk, shown in the import dialog first), a policy (every loaded
// plugin, with editors generated from its parameters), the device (CUDA only where it works),
// steps, warmup and seed; the simulator's predicted peak memory and FLOPs update as the choice
// changes, before anything runs. The choice scrolls; Run and Cancel, the progress of the running
// step and the last error are pinned under it, always in sight.
#pragma once
#include <QFutureWatcher>
#include <QWidget>
#include <memory>
#include <optional>

#include "core/engine/simulator.h"
#include "run_controller.h"

class QComboBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QScrollArea;
class QSpinBox;
class QTimer;
class QToolButton;

namespace remat {
class Backend;
struct LoadedPolicy;
}

namespace remat::gui {

class ModelEditor;
class ModelImportDialog;
class ParamEditor;

struct PredictionOutcome {
  int generation = 0;
  bool ok = false;
  QString error;
  Prediction prediction;
  std::size_t actions = 0;
};

class RunPanel : public QWidget {
  Q_OBJECT
 public:
  explicit RunPanel(const PolicyRegistry& registry, QWidget* parent = nullptr);
  ~RunPanel() override;

  bool selectModel(const QString& preset);
  // Our model JSON or a Hugging Face config.json; the error is also shown in the panel.
  bool loadModelFile(const QString& path, QString* error = nullptr);
  // What Open… does: imports the file and opens (window-modal, not blocking) the dialog that says
  // what was imported or every problem; the model is used only when the dialog is accepted.
  ModelImportDialog* openModelFile(const QString& path);
  bool selectPolicy(const QString& name);
  bool setPolicyParam(const QString& name, const QString& value);
  void setMemoryBudget(const QString& text);
  // A run directory whose measured step times the planner uses instead of FLOPs ("" = FLOPs).
  void setCostsFrom(const QString& dir);
  void setSteps(int steps);
  void setWarmup(int warmup);
  void setSeed(int seed);
  bool setDevice(const QString& device);
  void setSaveRoot(const QString& dir) { save_root_ = dir; }

  QString modelName() const;
  QString policyName() const;
  // What Run would start; nullopt (and why) when the choice cannot run.
  std::optional<RunRequest> request(QString* why = nullptr) const;
  bool predictionPending() const { return pending_; }
  const PredictionOutcome& lastPrediction() const { return last_; }

  void setRunning(bool running);
  void setProgress(double fraction, const QString& what);
  void showError(const QString& message);  // empty clears it
  QString errorText() const;

  QPushButton* runButton() const { return run_; }
  QPushButton* cancelButton() const { return cancel_; }
  ModelEditor* modelEditor() const { return editor_; }
  ParamEditor* paramEditor() const { return params_; }
  QComboBox* modelBox() const { return models_; }
  QComboBox* policyBox() const { return policies_; }
  QComboBox* deviceBox() const { return device_; }
  QLabel* predictionLabel() const { return prediction_; }
  QProgressBar* progressBar() const { return progress_; }
  QLineEdit* budgetField() const { return budget_; }
  QScrollArea* formScroll() const { return scroll_; }
  QToolButton* fieldsToggle() const { return fields_toggle_; }
  QLabel* policyHelp() const { return policy_help_; }
  QSize sizeHint() const override;

 signals:
  void runRequested();
  void cancelRequested();
  void choiceChanged();

 private:
  void changeEvent(QEvent* e) override;
  void fillModelBox();
  void colourFamilyHeaders();
  void useModelFile(const QString& path, const ModelConfig& m);
  void onModelChosen(int index);
  void onPolicyChosen();
  void onChoiceChanged();
  void startPrediction();
  void onPrediction();
  void updateRunEnabled();
  static bool budgetShown(const LoadedPolicy* p);

  const PolicyRegistry& registry_;
  std::unique_ptr<Backend> mirror_, cuda_mirror_;  // the predictions' CPU and CUDA backends
  QComboBox* models_;
  QToolButton* open_model_;
  QToolButton* fields_toggle_;
  ModelEditor* editor_;
  QLabel* model_error_;
  QComboBox* policies_;
  QLabel* policy_help_;
  ParamEditor* params_;
  QLineEdit* budget_;
  QFormLayout* budget_form_ = nullptr;
  QWidget* form_ = nullptr;
  QScrollArea* scroll_ = nullptr;
  QLineEdit* costs_;
  QToolButton* costs_browse_;
  QComboBox* device_;
  QSpinBox* steps_;
  QSpinBox* warmup_;
  QSpinBox* seed_;
  QSpinBox* threads_;
  QLabel* prediction_;
  QPushButton* run_;
  QPushButton* cancel_;
  QProgressBar* progress_;
  QLabel* status_;
  QLabel* error_;
  QTimer* debounce_;
  QFutureWatcher<PredictionOutcome> watcher_;
  PredictionOutcome last_;
  int generation_ = 0;
  bool pending_ = false, running_ = false, filling_ = false;
  QString save_root_;
};

}  // namespace remat::gui
