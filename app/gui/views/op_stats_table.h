// A sortable table of time per op type, per kernel or per block (core/analysis/op_stats.h):
// count, total and the total split by phase (forward, recompute, backward, optimizer: the
// recompute column is what recomputation cost each op type or block), mean, min, max and share
// of the step, with a choice of grouping, a line of what recomputation cost in all, and CSV
// export. The op timeline shows one for the whole step and one for the selected time range.
#pragma once
#include <QWidget>
#include <memory>

#include "core/analysis/op_stats.h"

class QComboBox;
class QLabel;
class QPushButton;
class QSortFilterProxyModel;
class QStandardItemModel;
class QTableView;

namespace remat::gui {

class OpStatsTable : public QWidget {
  Q_OBJECT
 public:
  explicit OpStatsTable(QWidget* parent = nullptr);
  // The ops of `t` that pass `f`; nullptr empties the table.
  void setTrace(std::shared_ptr<const Trace> t, const OpStatsFilter& f = {});
  // ... all the ops of `t`, with their statistics by op type computed before (used unless the
  // table groups by kernel).
  void setStats(std::shared_ptr<const Trace> t, std::vector<OpStat> by_op_type);
  void setFilter(const OpStatsFilter& f);
  void setKey(OpStatKey k);
  void setNote(const QString& html);
  const std::vector<OpStat>& stats() const { return stats_; }
  QTableView* table() const { return table_; }
  QSortFilterProxyModel* proxy() const { return proxy_; }
  // Writes the rows shown as CSV (core's writer); false with the reason in `error`.
  bool exportCsv(const QString& path, QString* error = nullptr) const;

  // Columns.
  enum Column { Key, Count, Total, Forward, Recompute, Backward, Optimizer, Mean, Min, Max, Share, NumColumns };
  // What recomputation cost over the rows shown (rich text; "" without recomputation).
  QString recomputeText() const;
  static constexpr int kSortRole = Qt::UserRole + 1;

 private:
  void refresh();
  void fill();
  void exportClicked();

  std::shared_ptr<const Trace> trace_;
  OpStatsFilter filter_;
  OpStatKey key_ = OpStatKey::OpType;
  std::vector<OpStat> stats_;
  QComboBox* group_;
  QLabel* note_;
  QLabel* recompute_;
  QPushButton* export_;
  QStandardItemModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
};

}  // namespace remat::gui
