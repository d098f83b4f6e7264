#include "run_header.h"

#include <QObject>
#include <algorithm>

#include "core/analysis/memory_timeline.h"
#include "core/analysis/routing_load.h"
#include "format.h"
#include "run_list.h"

namespace remat::gui {

namespace {

QString ms(double v) { return QString::number(v, 'f', v >= 100 ? 1 : 2) + " ms"; }

QString steps_word(int n) { return n == 1 ? QObject::tr("1 step") : QObject::tr("%1 steps").arg(n); }

// "step median 297.0 ms (min–max 280.1–418.0 ms over 3 steps)".
QString step_text(const StepTimes& s) {
  if (s.counted == 1) return QObject::tr("step %1 (1 step: no spread)").arg(ms(s.median));
  return QObject::tr("step median %1 (min–max %2–%3 over %4)")
      .arg(ms(s.median), ms(s.min), ms(s.max), steps_word(s.counted));
}

}  // namespace

StepTimes step_times(const Trace& t) {
  StepTimes s;
  const std::vector<double> v = t.step_times_ms();
  if (v.empty()) return s;
  s.counted = static_cast<int>(v.size());
  s.median = median(v);
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  s.min = *lo;
  s.max = *hi;
  s.last = v.back();
  return s;
}

std::uint64_t plotted_peak_bytes(const Trace& t) {
  std::int64_t peak = 0;
  for_each_timeline_point(t, [&peak](const TimelinePoint& p) { peak = std::max(peak, p.device); });
  return static_cast<std::uint64_t>(std::max<std::int64_t>(peak, 0));
}

QString no_ops_note(const Trace& t) {
  if (t.imported())
    return QObject::tr("This trace, imported from %1, holds no ops: the memory timeline shows every allocation it "
                       "records.")
        .arg(QString::fromStdString(t.source));
  const int done = static_cast<int>(t.step_times_ms().size());
  const QString all = QObject::tr("the memory timeline shows every allocation of the run until it stopped.");
  if (done > 0)
    return QObject::tr("The run stopped after %1 of %2, before its last counted step, the one whose schedule and ops "
                       "a run records: %3")
        .arg(done)
        .arg(steps_word(t.steps), all);
  return QObject::tr("No counted step finished, so no schedule or ops were recorded: %1").arg(all);
}

QString run_header(const Trace& t) {
  const QString params = t.policy_params.empty() ? QString() : ":" + QString::fromStdString(t.policy_params).toHtmlEscaped();
  QString s = QString("<b>%1</b> · %2%3 on %4")
                  .arg(QString::fromStdString(t.model.name).toHtmlEscaped(),
                       QString::fromStdString(t.policy).toHtmlEscaped(), params, QString::fromStdString(t.device));
  const StepTimes st = step_times(t);
  // Only our own runs have a prediction: a recorded or imported trace says where it came from.
  const QString predicted =
      t.source == kOwnSource
          ? QObject::tr("predicted %1").arg(human_bytes(static_cast<double>(t.predicted_peak_bytes)))
          : QObject::tr("not predicted: from %1").arg(QString::fromStdString(t.source).toHtmlEscaped());
  const bool whole_run = timeline_range(t).whole_run;
  if (t.complete) {
    s += QObject::tr(" · peak <b>%1</b> (%2)").arg(human_bytes(static_cast<double>(t.peak_bytes)), predicted);
  } else {
    // A run that stopped early: how far it got and what it reached, not a peak of 0 B.
    const int warm_done = static_cast<int>(
        std::count_if(t.step_stats.begin(), t.step_stats.end(), [](const StepStats& x) { return !x.counted; }));
    QString how = QObject::tr("%1 after %2 of %3").arg(incomplete_state(t)).arg(st.counted).arg(steps_word(t.steps));
    if (st.counted == 0 && t.warmup > 0)
      how += QObject::tr(" (warmup: %1 of %2 done)").arg(warm_done).arg(t.warmup);
    const std::uint64_t so_far = std::max(t.peak_bytes, plotted_peak_bytes(t));
    s += QString(" · <span style='color:#d62728'><b>%1</b>; peak so far <b>%2</b></span> (%3)")
             .arg(how.toHtmlEscaped(), human_bytes(static_cast<double>(so_far)), predicted);
  }
  if (st.counted > 0) s += " · " + step_text(st).toHtmlEscaped();
  if (!whole_run && st.counted > 0)
    s += " · " + QObject::tr("plots: step %1 of %2 (%3)").arg(st.counted).arg(t.steps).arg(ms(st.last)).toHtmlEscaped();
  else
    s += " · " + QObject::tr("plots: every event of the run, until it stopped").toHtmlEscaped();
  s += QObject::tr(" · %1 ops").arg(t.ops.size());
  // A mixture of experts: how uneven its router was (routing.csv), at its most uneven layer.
  const std::vector<LayerLoad> loads = layer_loads(t.routing, t.model.moe.on() ? t.model.moe.experts : 0);
  if (!loads.empty()) {
    const auto w = std::max_element(loads.begin(), loads.end(),
                                    [](const LayerLoad& a, const LayerLoad& b) { return a.imbalance < b.imbalance; });
    s += " · " + QObject::tr("routing: busiest expert %1× the mean (layer %2)")
                     .arg(QString::number(w->imbalance, 'f', 2))
                     .arg(w->layer)
                     .toHtmlEscaped();
  }
  if (!t.complete && t.status != "cancelled")
    s += " · <span style='color:#d62728'>" + QString::fromStdString(t.error).toHtmlEscaped() + "</span>";
  return s;
}

}  // namespace remat::gui
