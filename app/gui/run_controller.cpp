#include "run_controller.h"

#include <QDateTime>
#include <QDir>
#include <QRegularExpression>
#include <QSysInfo>
#include <cmath>

#include "core/analysis/measured_costs.h"
#include "core/backend/backend_factory.h"
#include "core/engine/run.h"
#include "core/trace/run_dir.h"
#include "core/util/error.h"
#include "export.h"

namespace remat::gui {

namespace {

void set_provenance(Trace& t, const std::string& k, const std::string& v) {
  for (auto& [key, val] : t.provenance)
    if (key == k) {
      val = v;
      return;
    }
  t.provenance.emplace_back(k, v);
}

}  // namespace

QString run_dir_name(const QString& root, const Trace& t) {
  QString base = QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss") + "-" +
                 QString::fromStdString(t.model.name) + "-" + QString::fromStdString(t.policy);
  base.replace(QRegularExpression("[^A-Za-z0-9._-]"), "_");
  QDir dir(root);
  QString name = base;
  for (int i = 2; dir.exists(name); ++i) name = base + "-" + QString::number(i);
  return dir.filePath(name);
}

Schedule plan_request(const PolicyRegistry& registry, const RunRequest& req,
                      std::optional<StepCosts>* costs) {
  std::optional<StepCosts> c;
  if (!req.costs_from.empty()) {
    try {
      c = step_costs_from_run_dir(req.costs_from, req.model);
    } catch (const Error& e) {
      throw Error("step costs from " + req.costs_from + ": " + e.what());
    }
  }
  Schedule s = registry.plan(req.policy, req.model, req.memory_budget, c ? &*c : nullptr);
  if (costs) *costs = std::move(c);
  return s;
}

void RunWorker::run(const RunRequest& req) {
  try {
    std::optional<StepCosts> costs;
    const Schedule s = plan_request(registry_, req, &costs);
    RunSpec spec;
    spec.model = req.model;
    spec.schedule = s;
    spec.steps = req.steps;
    spec.warmup = req.warmup;
    spec.seed = req.seed;
    SteadyClock clock;
    Device dev = make_device(req.device, req.threads, clock, true);
    RunCallbacks cb;
    cb.cancel = &cancel_;
    int last_permille = -1;
    std::string last_what;
    cb.progress = [&](double f, const std::string& what) {
      const int pm = static_cast<int>(std::lround(f * 1000));
      if (pm == last_permille && what == last_what) return;
      last_permille = pm;
      last_what = what;
      emit progress(f, QString::fromStdString(what));
    };
    Trace t;
    try {
      t = run_training(spec, *dev.backend, dev.profiler.get(), clock, cb);
    } catch (const OutOfMemoryError& e) {
      t = refused_run(spec, *dev.backend, e);  // refused before the first step, as the CLI
    }
    t.memory_budget = req.memory_budget.value_or(0);
    add_costs_provenance(t, costs);
    set_provenance(t, "command", "rematlab (desktop app)");
    set_provenance(t, "created", QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString());
    set_provenance(t, "os", (QSysInfo::kernelType() + " " + QSysInfo::kernelVersion() + " " +
                             QSysInfo::currentCpuArchitecture()).toStdString());
    set_provenance(t, "format_version", std::to_string(t.format_version));
    auto trace = std::make_shared<const Trace>(std::move(t));
    QString dir, save_error;
    if (!req.save_root.isEmpty()) {
      try {
        if (!QDir().mkpath(req.save_root)) throw Error("cannot create '" + req.save_root.toStdString() + "'");
        const QString path = run_dir_name(req.save_root, *trace);
        save_run_dir(*trace, path, false);
        dir = path;
      } catch (const std::exception& e) {
        save_error = QString::fromStdString(e.what());
      }
    }
    emit finished(trace, dir, save_error);
  } catch (const std::bad_alloc&) {
    emit failed(QStringLiteral("out of memory: the run needed more memory than this machine has"));
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()));
  } catch (...) {
    emit failed(QStringLiteral("the run failed with an unknown error"));
  }
}

RunController::RunController(const PolicyRegistry& registry, QObject* parent)
    : QObject(parent), worker_(new RunWorker(registry, cancel_)) {
  qRegisterMetaType<std::shared_ptr<const remat::Trace>>("std::shared_ptr<const remat::Trace>");
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  connect(worker_, &RunWorker::progress, this, &RunController::progress);
  connect(worker_, &RunWorker::finished, this,
          [this](std::shared_ptr<const remat::Trace> t, const QString& dir, const QString& err) {
            running_ = false;
            emit finished(std::move(t), dir, err);
          });
  connect(worker_, &RunWorker::failed, this, [this](const QString& e) {
    running_ = false;
    emit failed(e);
  });
  thread_.setObjectName("rematlab-run");
  thread_.start();
}

RunController::~RunController() {
  cancel_.store(true);
  thread_.quit();
  thread_.wait();
}

bool RunController::start(const RunRequest& req) {
  if (running_) return false;
  running_ = true;
  cancel_.store(false);
  RunWorker* w = worker_;
  QMetaObject::invokeMethod(w, [w, req] { w->run(req); }, Qt::QueuedConnection);
  emit started();
  return true;
}

void RunController::cancel() {
  if (running_) cancel_.store(true);
}

}  // namespace remat::gui
