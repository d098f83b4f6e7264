// rematlab._predictor: the engine's prediction for a recorded PyTorch step
// (core/analysis/recorded_plan.h), the same code `rematlab-batch plan --from-run` runs, built
// into the Python package (python/setup.py lists its sources).
#include <pybind11/pybind11.h>

#include "core/analysis/recorded_plan.h"
#include "core/analysis/recorded_plan_json.h"
#include "core/util/error.h"

namespace py = pybind11;

namespace {

// The plan as the engine reads it (its canonical text); ValueError saying the syntax.
std::string check_plan(const std::string& text) { return remat::parse_checkpoint_plan(text).text; }

// The prediction of `plan` for the recorded run in `dir`, as JSON text (prediction_json).
std::string predict_json(const std::string& dir, const std::string& plan_text) {
  const remat::CheckpointPlanSpec plan = remat::parse_checkpoint_plan(plan_text);
  const remat::RecordedRun run = remat::read_recorded_run(dir);
  return remat::prediction_json(plan, remat::predict_recorded_plan(run, plan)).dump();
}

}  // namespace

PYBIND11_MODULE(_predictor, m) {
  m.doc() = "RematLab's predictor for recorded PyTorch steps (rematlab.predict)";
  py::register_exception<remat::Error>(m, "PredictorError", PyExc_ValueError);
  m.def("check_plan", &check_plan, py::arg("plan"));
  m.def("predict_json", &predict_json, py::arg("run_dir"), py::arg("plan"));
}
