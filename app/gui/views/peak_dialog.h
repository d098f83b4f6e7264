// "Alive at the peak": every tensor alive at the instant a run reaches its peak
// (core/analysis/peak_alive.h), in a sortable table — tensor, bytes, category, block, when it was
// allocated and freed, and why it is kept — under a line that says what they sum to against the
// peak, when, and during which op. Opened from the memory timeline's button or by clicking its
// peak marker or label; for own runs, ranks and imported traces alike.
#pragma once
#include <QDialog>

#include "core/analysis/peak_alive.h"
#include "core/trace/trace.h"

class QLabel;
class QTableWidget;

namespace remat::gui {

class PeakAliveDialog : public QDialog {
  Q_OBJECT
 public:
  // `origin`: the time the memory timeline's axis starts at (times are shown from it).
  PeakAliveDialog(const Trace& t, std::int64_t origin, QWidget* parent = nullptr);
  const PeakAlive& peak() const { return peak_; }
  QLabel* header() const { return header_; }
  QTableWidget* table() const { return table_; }

 private:
  PeakAlive peak_;
  QLabel* header_;
  QTableWidget* table_;
};

// The line over the table: "23 tensors alive at the peak: 8.67 MiB, the peak exactly · at 7.9 ms,
// during h2.attn.probs (forward)".
QString peak_alive_summary(const PeakAlive& p, std::int64_t origin);

}  // namespace remat::gui
