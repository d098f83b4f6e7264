// The ledger of the last counted step: every tensor a block saved, with its bytes, category,
// when it was created and freed, what the policy decided (kept, checkpoint, offloaded,
// discarded, recomputed) and why (what rebuilding it would run again). Sortable by any column, filtered by text; rows can be selected from
// the memory timeline (the tensors alive at a clicked moment).
#pragma once
#include <QAbstractTableModel>
#include <QList>
#include <QPair>
#include <QWidget>
#include <memory>

#include "core/trace/trace.h"

class QLineEdit;
class QLabel;
class QSortFilterProxyModel;
class QTableView;

namespace remat::gui {

class LedgerModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Block, Tensor, Bytes, Category, Created, CreatedAt, FreedAt, Decision, Why, ColumnCount };
  explicit LedgerModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
  void setTrace(std::shared_ptr<const Trace> t);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;
  const LedgerEntry* entry(int row) const;

 private:
  std::shared_ptr<const Trace> trace_;
  std::int64_t origin_ = 0;
};

class LedgerView : public QWidget {
  Q_OBJECT
 public:
  explicit LedgerView(QWidget* parent = nullptr);
  void setTrace(std::shared_ptr<const Trace> t);
  // Selects the rows of these (block, tensor) pairs (those alive at t_ns when a tensor has
  // several rows and t_ns >= 0); returns how many rows were selected.
  int selectTensors(const QList<QPair<int, QString>>& tensors, qint64 t_ns = -1);
  void setFilter(const QString& text);
  QTableView* table() const { return table_; }
  QSortFilterProxyModel* proxy() const { return proxy_; }
  LedgerModel* model() const { return model_; }

 private:
  void updateCount();
  LedgerModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  QLineEdit* filter_;
  QLabel* count_;
};

}  // namespace remat::gui
