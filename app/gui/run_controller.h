// Runs training in a worker thread, the way the batch mode's `run` does (plan, make the device,
// run_training, an out-of-memory refusal kept as an incomplete run), and hands the finished,
// immutable Trace to the GUI thread through a typed signal. Cancel sets the flag the executor
// checks between ops; the run then comes back with status "cancelled". Each finished run is
// saved as a run directory from the worker thread, so the window never waits on the disk.
#pragma once
#include <QObject>
#include <QString>
#include <QThread>
#include <atomic>
#include <memory>
#include <optional>

#include "core/model/model_config.h"
#include "core/plugin/registry.h"
#include "core/trace/trace.h"

Q_DECLARE_METATYPE(std::shared_ptr<const remat::Trace>)

namespace remat::gui {

struct RunRequest {
  ModelConfig model;
  PolicyChoice policy;
  std::optional<std::uint64_t> memory_budget;
  std::string costs_from;  // a run directory: plan with its measured step times ("" = FLOPs)
  std::string device = "cpu";
  int steps = 3, warmup = 1, threads = 2;
  std::uint64_t seed = 0;
  QString save_root;  // the run directory goes in here ("" = not saved)
};

class RunWorker : public QObject {
  Q_OBJECT
 public:
  RunWorker(const PolicyRegistry& registry, const std::atomic<bool>& cancel)
      : registry_(registry), cancel_(cancel) {}
  void run(const RunRequest& req);

 signals:
  void progress(double fraction, const QString& what);
  void finished(std::shared_ptr<const remat::Trace> trace, const QString& dir, const QString& save_error);
  void failed(const QString& error);

 private:
  const PolicyRegistry& registry_;
  const std::atomic<bool>& cancel_;
};

class RunController : public QObject {
  Q_OBJECT
 public:
  explicit RunController(const PolicyRegistry& registry, QObject* parent = nullptr);
  ~RunController() override;  // cancels a run and waits for it

  bool start(const RunRequest& req);  // false while a run is going
  void cancel();
  bool running() const { return running_; }

 signals:
  void started();
  void progress(double fraction, const QString& what);
  void finished(std::shared_ptr<const remat::Trace> trace, const QString& dir, const QString& save_error);
  void failed(const QString& error);

 private:
  QThread thread_;
  std::atomic<bool> cancel_{false};
  RunWorker* worker_;
  bool running_ = false;
};

// The schedule a request runs: the policy planned for its model and budget, with the step costs
// measured in `costs_from` when it names a run directory (the costs are returned too). Throws
// Error; a bad costs directory is named in the message.
Schedule plan_request(const PolicyRegistry& registry, const RunRequest& req,
                      std::optional<StepCosts>* costs = nullptr);

// A new directory name under `root` for a run: <time>-<model>-<policy>.
QString run_dir_name(const QString& root, const Trace& t);

}  // namespace remat::gui
