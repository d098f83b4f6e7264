// The runs of this session and those opened from disk: a list model with a check box per run
// (the runs to compare), a color swatch, the figures in the label and the details in the
// tooltip. Cancelled and failed runs are kept, marked "(cancelled)", "(out of memory)" or
// "(failed)" after their name, and not checked when added.
#pragma once
#include <QAbstractListModel>
#include <vector>

#include "run_entry.h"

namespace remat::gui {

// "cancelled", "out of memory" or "failed" for an incomplete trace; empty for a complete one.
QString incomplete_state(const Trace& t);

class RunListModel : public QAbstractListModel {
  Q_OBJECT
 public:
  explicit RunListModel(QObject* parent = nullptr) : QAbstractListModel(parent) {}

  // Adds a run, checked for comparison when its trace is complete; returns its row.
  int add(std::shared_ptr<const Trace> trace, const QString& dir);
  void remove(int row);
  const RunEntry& at(int row) const { return runs_[static_cast<std::size_t>(row)]; }
  const std::vector<RunEntry>& runs() const { return runs_; }
  std::vector<RunEntry> checked() const;
  bool isChecked(int row) const { return checked_[static_cast<std::size_t>(row)]; }
  void setChecked(int row, bool on);
  int findDir(const QString& dir) const;  // -1 when no run was read from there

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;

 signals:
  void checkedChanged();

 private:
  std::vector<RunEntry> runs_;
  std::vector<bool> checked_;
  int next_id_ = 1;
};

}  // namespace remat::gui
