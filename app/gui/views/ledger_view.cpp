#include "views/ledger_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelection>
#include <QLabel>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

#include "core/analysis/live_tensors.h"
#include "core/analysis/memory_timeline.h"
#include "format.h"
#include "theme.h"

namespace remat::gui {

void LedgerModel::setTrace(std::shared_ptr<const Trace> t) {
  beginResetModel();
  trace_ = std::move(t);
  origin_ = trace_ ? timeline_range(*trace_).start_ns : 0;
  endResetModel();
}

int LedgerModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !trace_ ? 0 : static_cast<int>(trace_->ledger.size());
}

int LedgerModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

const LedgerEntry* LedgerModel::entry(int row) const {
  if (!trace_ || row < 0 || static_cast<std::size_t>(row) >= trace_->ledger.size()) return nullptr;
  return &trace_->ledger[static_cast<std::size_t>(row)];
}

QVariant LedgerModel::data(const QModelIndex& index, int role) const {
  const LedgerEntry* e = entry(index.row());
  if (!e) return {};
  const bool freed = e->freed_ns > 0 && e->freed_ns >= e->created_ns;
  if (role == Qt::UserRole) {  // the sort key
    switch (index.column()) {
      case Block: return e->block;
      case Tensor: return QString::fromStdString(e->tensor);
      case Bytes: return static_cast<qulonglong>(e->bytes);
      case Category: return QString::fromLatin1(to_string(e->category));
      case Created: return static_cast<int>(e->created);
      case CreatedAt: return static_cast<qlonglong>(e->created_ns);
      case FreedAt: return freed ? static_cast<qlonglong>(e->freed_ns) : std::numeric_limits<qlonglong>::max();
      case Decision: return QString::fromStdString(e->decision);
      case Why: return QString::fromStdString(e->why);
    }
  }
  if (role == Qt::DisplayRole) {  // blocks and tensors named as the op timeline names them ("h4.attn.q")
    switch (index.column()) {
      case Block: return e->block >= 0 ? QString("h%1").arg(e->block) : QString("—");
      case Tensor: return QString::fromStdString(block_qualified(e->block, e->tensor));
      case Bytes: return human_bytes(static_cast<double>(e->bytes));
      case Category: return category_name(e->category);
      case Created: return QString::fromLatin1(to_string(e->created));
      case CreatedAt: return human_time_ns(static_cast<double>(e->created_ns - origin_));
      case FreedAt: return freed ? human_time_ns(static_cast<double>(e->freed_ns - origin_)) : QString("—");
      case Decision: return QString::fromStdString(e->decision);
      case Why: return e->why.empty() ? QString("—") : QString::fromStdString(e->why);
    }
  }
  if (role == Qt::ToolTipRole && index.column() == Why && !e->why.empty()) return QString::fromStdString(e->why);
  if (role == Qt::ToolTipRole && index.column() == Bytes) return QString("%1 bytes").arg(e->bytes);
  if (role == Qt::TextAlignmentRole && (index.column() == Bytes || index.column() == CreatedAt || index.column() == FreedAt || index.column() == Block))
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::DecorationRole && index.column() == Category) return category_color(e->category);
  return {};
}

QVariant LedgerModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Block", "Tensor", "Bytes", "Category", "Created in", "Created at", "Freed at", "Decision", "Why"};
  return tr(names[section]);
}

LedgerView::LedgerView(QWidget* parent)
    : QWidget(parent),
      model_(new LedgerModel(this)),
      proxy_(new QSortFilterProxyModel(this)),
      table_(new QTableView(this)),
      filter_(new QLineEdit(this)),
      count_(new QLabel(this)) {
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole);
  proxy_->setFilterKeyColumn(-1);
  proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(LedgerModel::CreatedAt, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  filter_->setPlaceholderText(tr("Filter: block (h4), tensor (h4.attn), category, decision, why (GEMM)…"));
  filter_->setClearButtonEnabled(true);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("<b>Ledger</b>"), this));
  top->addWidget(filter_, 1);
  top->addWidget(count_);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  l->addLayout(top);
  l->addWidget(table_, 1);
  connect(filter_, &QLineEdit::textChanged, this, &LedgerView::setFilter);
  updateCount();
}

void LedgerView::setTrace(std::shared_ptr<const Trace> t) {
  model_->setTrace(std::move(t));
  table_->resizeColumnsToContents();
  updateCount();
}

void LedgerView::setFilter(const QString& text) {
  if (filter_->text() != text) filter_->setText(text);
  proxy_->setFilterFixedString(text);
  updateCount();
}

void LedgerView::updateCount() {
  count_->setText(tr("%1 of %2 rows").arg(proxy_->rowCount()).arg(model_->rowCount()));
}

int LedgerView::selectTensors(const QList<QPair<int, QString>>& tensors, qint64 t_ns) {
  QItemSelection sel;
  for (const auto& [block, name] : tensors) {
    std::vector<int> rows, alive;
    for (int r = 0; r < proxy_->rowCount(); ++r) {
      const LedgerEntry* e = model_->entry(proxy_->mapToSource(proxy_->index(r, 0)).row());
      if (!e || e->block != block || QString::fromStdString(e->tensor) != name) continue;
      rows.push_back(r);
      if (t_ns >= 0 && e->created_ns <= t_ns && (e->freed_ns <= 0 || t_ns <= e->freed_ns)) alive.push_back(r);
    }
    for (int r : alive.empty() ? rows : alive)
      sel.select(proxy_->index(r, 0), proxy_->index(r, LedgerModel::ColumnCount - 1));
  }
  table_->selectionModel()->select(sel, QItemSelectionModel::ClearAndSelect);
  if (!sel.isEmpty()) table_->scrollTo(sel.indexes().front());
  int rows = 0;
  for (const auto& range : sel) rows += range.height();
  return rows;
}

}  // namespace remat::gui
