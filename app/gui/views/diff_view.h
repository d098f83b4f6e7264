// The Diff page: two runs' steps op by op (core/analysis/op_diff.h, as `rematlab-batch diff`).
// Pick run A and run B; a line sums what B added, removed and changed per phase, two lanes
// draw each run's compute ops on one time axis (each from its own step's start) colored by
// whether B kept, added or removed them, and a table lists every matched or unmatched op side by
// side (A's and B's start and time, the difference), all of them or the changes only. Runs that
// are not alike are refused with what differs, never drawn. The diff is made on a worker thread.
#pragma once
#include <QAbstractTableModel>
#include <QWidget>
#include <memory>
#include <vector>

#include "core/analysis/op_diff.h"
#include "run_entry.h"
#include "views/span_timeline_view.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QSplitter;
class QTableView;

namespace remat::gui {

// Two rows, A's compute ops and B's, a span per diff row (Span::index) colored by its status.
class DiffLanes : public SpanTimelineView {
  Q_OBJECT
 public:
  explicit DiffLanes(QWidget* parent = nullptr);
  void setDiff(std::shared_ptr<const OpDiff> d, const QString& a, const QString& b);
  static QColor statusColor(DiffStatus s);

 protected:
  QString describe(const Span& s, int row) const override;

 private:
  std::shared_ptr<const OpDiff> diff_;
  QString a_name_, b_name_;
};

// The diff's rows as a table: all of them, or only those added, removed or changed in time.
class DiffTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Status, Phase_, Block, Name, AStart, ATime, BStart, BTime, Delta, Columns };
  explicit DiffTableModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
  void setDiff(std::shared_ptr<const OpDiff> d, bool changes_only);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;
  const DiffRow& diffRow(int row) const { return diff_->rows[shown_[static_cast<std::size_t>(row)]]; }

 private:
  std::shared_ptr<const OpDiff> diff_;
  std::vector<std::size_t> shown_;  // indices into diff_->rows
};

class DiffView : public QWidget {
  Q_OBJECT
 public:
  explicit DiffView(QWidget* parent = nullptr);
  // The runs to choose from; B is `current` (an index into them, -1: the last), A stays the run
  // it was while that run is in the list, else the first `none` run B can be diffed against,
  // else the run before B. The same two runs as the diff shown are not diffed again.
  void setRuns(const std::vector<RunEntry>& runs, int current);
  // Diffs runs a and b (indices into the runs given); the result shows when the worker is done.
  void diff(int a, int b);
  bool busy() const { return busy_; }
  QComboBox* runA() const { return a_; }
  QComboBox* runB() const { return b_; }
  QLabel* summary() const { return summary_; }
  QCheckBox* changesOnly() const { return changes_; }
  DiffLanes* lanes() const { return lanes_; }
  QTableView* table() const { return table_; }
  DiffTableModel* model() const { return model_; }
  std::shared_ptr<const OpDiff> result() const { return diff_; }

 signals:
  void diffShown();  // a diff, or the reason there is none, is shown

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  void showResult(std::shared_ptr<const OpDiff> d, const QString& error);

  std::vector<RunEntry> runs_;
  QComboBox *a_, *b_;
  QCheckBox* changes_;
  QLabel* summary_;
  QSplitter* split_;
  DiffLanes* lanes_;
  QTableView* table_;
  DiffTableModel* model_;
  std::shared_ptr<const OpDiff> diff_;
  std::shared_ptr<const Trace> diffed_a_, diffed_b_;  // the runs of the diff shown or under way
  std::uint64_t generation_ = 0;
  bool busy_ = false, dirty_ = false;
};

// The line over the lanes: "122 ops matched, 28 added, 0 removed · recompute: +28 ops, +1.45 ms
// · backward: −0.12 ms on matched ops · step 48.2 → 49.9 ms".
QString diff_summary(const OpDiff& d);

}  // namespace remat::gui
