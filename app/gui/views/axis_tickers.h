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

class TimeTicker : public QCPAxisTicker {
 protected:
  double getTickStep(const QCPRange& range) override;
  QString getTickLabel(double tick, const QLocale& locale, QChar formatChar, int precision) override;

 private:
  double unit_ = 1;
  int decimals_ = 0;
};

// A fraction of the step time, labelled in percent.
class FractionTicker : public QCPAxisTicker {
 protected:
  QString getTickLabel(double tick, const QLocale& locale, QChar formatChar, int precision) override;
};

}  // namespace remat::gui
