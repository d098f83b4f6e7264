#include "views/axis_tickers.h"

#include <QFontMetrics>
#include <algorithm>
#include <cmath>

namespace remat::gui {

namespace {

// A 1-2-5 step near range/ticks, in units of `unit`.
double nice_step(double size, int ticks) {
  double raw = size / std::max(ticks, 1);
  if (!(raw > 0)) return 1;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double m = raw / mag;
  double nice = m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10;
  return nice * mag;
}

// The smallest 1-2-5 step at least size/ticks: at most `ticks` steps in `size`.
double nice_step_at_least(double size, int ticks) {
  double raw = size / std::max(ticks, 1);
  if (!(raw > 0)) return 1;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double m = raw / mag;
  double nice = m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10;
  return nice * mag;
}

// The 1-2-5 step below `step` (itself a 1-2-5 step).
double nice_below(double step) {
  const double mag = std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  const double m = step / mag;
  return m > 4.5 ? 2 * mag : m > 1.5 ? mag : 0.5 * mag;
}

// Ticks of `step` inside `range`.
double ticks_inside(const QCPRange& range, double step) {
  return std::floor(range.upper / step + 1e-9) - std::ceil(range.lower / step - 1e-9) + 1;
}

int decimals_for(double step) {
  if (step >= 1) return 0;
  return std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
}

QString trim(QString s) {
  if (s.contains('.')) {
    while (s.endsWith('0')) s.chop(1);
    if (s.endsWith('.')) s.chop(1);
  }
  return s;
}

}  // namespace

double BytesTicker::getTickStep(const QCPRange& range) {
  static const double units[] = {1.0, 1024.0, 1024.0 * 1024, 1024.0 * 1024 * 1024, 1024.0 * 1024 * 1024 * 1024};
  const double top = std::max(std::fabs(range.lower), std::fabs(range.upper));
  int u = 0;
  while (u < 4 && top >= units[u + 1]) ++u;
  unit_ = units[u];
  double step = nice_step(range.size() / unit_, tickCount());
  if (u == 0) step = std::max(1.0, step);
  decimals_ = decimals_for(step);
  return step * unit_;
}

QString BytesTicker::getTickLabel(double tick, const QLocale&, QChar, int) {
  static const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = unit_ >= 1024.0 * 1024 * 1024 * 1024 ? 4 : unit_ >= 1024.0 * 1024 * 1024 ? 3 : unit_ >= 1024.0 * 1024 ? 2 : unit_ >= 1024.0 ? 1 : 0;
  if (std::fabs(tick) < 1e-9 * unit_) return "0";
  return trim(QString::number(tick / unit_, 'f', decimals_)) + " " + names[u];
}

double TimeTicker::getTickStep(const QCPRange& range) {
  static const double units[] = {1.0, 1e3, 1e6, 1e9};
  const double size = range.size();
  int u = 0;
  while (u < 3 && size >= 2 * units[u + 1]) ++u;
  unit_ = units[u];
  double step = nice_step(size / unit_, tickCount());
  if (axis_ && axis_->axisRect()) {
    // Room for the widest label this axis can show ("888.888 ms") and a gap on each side.
    const QFontMetrics fm(axis_->tickLabelFont());
    const int label = fm.horizontalAdvance(QStringLiteral("888.888 ms")) + fm.horizontalAdvance(QStringLiteral("MM"));
    // The ticks are made before the layout of the replot that draws them: the axis rect still
    // has the previous size, so its width is taken from the plot's current viewport less the
    // margins it had around it.
    const QCPAxisRect* r = axis_->axisRect();
    const int width = axis_->parentPlot()->viewport().width() - (r->outerRect().width() - r->width());
    const int fit = std::max(2, width / std::max(label, 1));
    step = nice_step_at_least(size / unit_, std::min(fit, tickCount()));
    // Rounded up to 1-2-5, the step may leave one tick in a range that does not start on one:
    // the next smaller step then, if the labels it makes (narrower than the room kept above) fit
    // side by side with a gap.
    if (ticks_inside(range, step * unit_) < 2) {
      const double smaller = nice_below(step);
      const double px = smaller * unit_ / size * width;
      const int d = decimals_for(smaller);
      auto text = [&](double v) { return trim(QString::number(v, 'f', d)) + " ms"; };  // a unit's width
      const double lo = std::ceil(range.lower / (smaller * unit_)) * smaller, hi = std::floor(range.upper / (smaller * unit_)) * smaller;
      const int widest = std::max(fm.horizontalAdvance(text(lo)), fm.horizontalAdvance(text(hi)));
      if (ticks_inside(range, smaller * unit_) >= 2 && px >= widest + fm.horizontalAdvance(QStringLiteral("M"))) step = smaller;
    }
  }
  if (u == 0) step = std::max(1.0, step);
  decimals_ = decimals_for(step);
  return step * unit_;
}

QString TimeTicker::getTickLabel(double tick, const QLocale&, QChar, int) {
  static const char* names[] = {"ns", "µs", "ms", "s"};
  int u = unit_ >= 1e9 ? 3 : unit_ >= 1e6 ? 2 : unit_ >= 1e3 ? 1 : 0;
  if (std::fabs(tick) < 1e-9 * unit_) return "0";
  return trim(QString::number(tick / unit_, 'f', decimals_)) + " " + names[u];
}

QString FractionTicker::getTickLabel(double tick, const QLocale&, QChar, int) {
  return trim(QString::number(tick * 100.0, 'f', 1)) + " %";
}

}  // namespace remat::gui
