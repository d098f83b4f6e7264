// Axis tickers of the plots: bytes on a binary scale (B, KiB, MiB, GiB) with round steps in the
// unit, times given in nanoseconds shown as ns / µs / ms / s, and fractions of a step.
#pragma once
#include <qcustomplot.h>

namespace remat::gui {

class BytesTicker : public QCPAxisTicker {
 protected:
  double getTickStep(const QCPRange& range) override;
  QString getTickLabel(double tick, const QLocale& locale, QChar formatChar, int precision) override;

 private:
  double unit_ = 1;
  int decimals_ = 0;
};

// With its axis given, as many ticks as the axis' width holds labels of its font side by side
// (never more than tickCount()), so labels never run into each other however narrow the plot.
class TimeTicker : public QCPAxisTicker {
 public:
  explicit TimeTicker(QCPAxis* axis = nullptr) : axis_(axis) {}

 protected:
  double getTickStep(const QCPRange& range) override;
  QString getTickLabel(double tick, const QLocale& locale, QChar formatChar, int precision) override;

 private:
  QCPAxis* axis_;
  double unit_ = 1;
  int decimals_ = 0;
};

// A fraction of the step time, labelled in percent.
class FractionTicker : public QCPAxisTicker {
 protected:
  QString getTickLabel(double tick, const QLocale& locale, QChar formatChar, int precision) override;
};

}  // namespace remat::gui
