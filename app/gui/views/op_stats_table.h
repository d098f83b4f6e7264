// A sortable table of time per op type or per kernel (core/analysis/op_stats.h): count, total,
// mean, min, max and share of the step, with a choice of grouping and CSV export. The op
// timeline shows one for the whole step and one for the selected time range.
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
  enum Column { Key, Count, Total, Mean, Min, Max, Share, NumColumns };
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
  QPushButton* export_;
  QStandardItemModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
};

}  // namespace remat::gui
