#include "views/op_stats_table.h"

#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QStandardItemModel>
#include <QTableView>
#include <QVBoxLayout>

#include "format.h"

namespace remat::gui {

OpStatsTable::OpStatsTable(QWidget* parent)
    : QWidget(parent),
      group_(new QComboBox(this)),
      note_(new QLabel(this)),
      recompute_(new QLabel(this)),
      export_(new QPushButton(tr("Export CSV…"), this)),
      model_(new QStandardItemModel(this)),
      proxy_(new QSortFilterProxyModel(this)),
      table_(new QTableView(this)) {
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(2, 2, 2, 2);
  auto* top = new QHBoxLayout;
  group_->addItem(tr("per op type"));
  group_->addItem(tr("per kernel / op name"));
  group_->addItem(tr("per block"));
  top->addWidget(group_);
  top->addWidget(note_, 1);
  top->addWidget(export_);
  l->addLayout(top);
  // The note wraps rather than widening the panel (a tab switch would move the plots).
  note_->setWordWrap(true);
  note_->setMinimumWidth(0);
  note_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  recompute_->setTextFormat(Qt::RichText);
  recompute_->setWordWrap(true);
  l->addWidget(recompute_);
  l->addWidget(table_, 1);
  model_->setHorizontalHeaderLabels({tr("name"), tr("count"), tr("total"), tr("forward"), tr("recompute"), tr("backward"),
                                     tr("optimizer"), tr("mean"), tr("min"), tr("max"), tr("share of step")});
  model_->horizontalHeaderItem(Recompute)->setToolTip(tr("What recomputation cost: the time of these ops run again "
                                                        "before the backward"));
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(kSortRole);
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(Total, Qt::DescendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 4);
  table_->horizontalHeader()->setSectionResizeMode(Key, QHeaderView::Stretch);
  connect(group_, qOverload<int>(&QComboBox::currentIndexChanged), this,
          [this](int i) { setKey(i == 2 ? OpStatKey::Block : i == 1 ? OpStatKey::Kernel : OpStatKey::OpType); });
  connect(export_, &QPushButton::clicked, this, &OpStatsTable::exportClicked);
}

void OpStatsTable::setTrace(std::shared_ptr<const Trace> t, const OpStatsFilter& f) {
  trace_ = std::move(t);
  filter_ = f;
  refresh();
}

void OpStatsTable::setFilter(const OpStatsFilter& f) {
  filter_ = f;
  refresh();
}

void OpStatsTable::setKey(OpStatKey k) {
  key_ = k;
  group_->blockSignals(true);
  group_->setCurrentIndex(k == OpStatKey::Block ? 2 : k == OpStatKey::Kernel ? 1 : 0);
  group_->blockSignals(false);
  refresh();
}

void OpStatsTable::setNote(const QString& html) { note_->setText(html); }

void OpStatsTable::setStats(std::shared_ptr<const Trace> t, std::vector<OpStat> by_op_type) {
  trace_ = std::move(t);
  filter_ = {};
  if (key_ != OpStatKey::OpType) return refresh();  // grouped by kernel: computed here
  stats_ = trace_ ? std::move(by_op_type) : std::vector<OpStat>{};
  fill();
}

void OpStatsTable::refresh() {
  stats_ = trace_ ? op_stats(*trace_, key_, filter_) : std::vector<OpStat>{};
  fill();
}

void OpStatsTable::fill() {
  const double step = trace_ ? static_cast<double>(step_length_ns(*trace_)) : 0.0;
  model_->removeRows(0, model_->rowCount());
  model_->setRowCount(static_cast<int>(stats_.size()));
  auto set = [this](int r, int c, const QString& text, const QVariant& sort) {
    auto* it = new QStandardItem(text);
    it->setData(sort, kSortRole);
    if (c != Key) it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    model_->setItem(r, c, it);
  };
  for (int r = 0; r < static_cast<int>(stats_.size()); ++r) {
    const OpStat& s = stats_[static_cast<std::size_t>(r)];
    const QString key = QString::fromStdString(s.key);
    set(r, Key, key, key);
    set(r, Count, QString::number(s.count), QVariant::fromValue<qulonglong>(s.count));
    set(r, Total, human_time_ns(static_cast<double>(s.total_ns)), QVariant::fromValue<qlonglong>(s.total_ns));
    set(r, Mean, human_time_ns(s.mean_ns()), s.mean_ns());
    const std::int64_t mn = s.count ? s.min_ns : 0;
    set(r, Min, human_time_ns(static_cast<double>(mn)), QVariant::fromValue<qlonglong>(mn));
    set(r, Max, human_time_ns(static_cast<double>(s.max_ns)), QVariant::fromValue<qlonglong>(s.max_ns));
    const double share = step > 0 ? static_cast<double>(s.total_ns) / step : 0.0;
    set(r, Share, QString::number(100.0 * share, 'f', 2) + " %", share);
    const int cols[] = {Forward, Recompute, Backward, Optimizer};
    for (std::size_t p = 0; p < kStatPhases.size(); ++p) {
      const std::int64_t ns = s.in(kStatPhases[p]);
      set(r, cols[p], ns ? human_time_ns(static_cast<double>(ns)) : QStringLiteral("—"), QVariant::fromValue<qlonglong>(ns));
    }
  }
  export_->setEnabled(!stats_.empty());
  recompute_->setText(recomputeText());
  recompute_->setVisible(!recompute_->text().isEmpty());
}

QString OpStatsTable::recomputeText() const {
  const OpStat all = op_stats_total(stats_);
  if (all.recompute_ns() <= 0) return {};
  const double step = trace_ ? static_cast<double>(step_length_ns(*trace_)) : 0.0;
  const std::uint64_t flops = all.phase_flops[static_cast<std::size_t>(Phase::Recompute)];
  QString s = tr("<b>recomputation</b>: %1 in %2 ops").arg(human_time_ns(static_cast<double>(all.recompute_ns())))
                  .arg(all.phase_count[static_cast<std::size_t>(Phase::Recompute)]);
  if (step > 0) s += tr(", %1 % of the step").arg(100.0 * static_cast<double>(all.recompute_ns()) / step, 0, 'f', 1);
  if (flops) s += ", " + human_flops(static_cast<double>(flops));
  return s;
}

bool OpStatsTable::exportCsv(const QString& path, QString* error) const {
  try {
    write_op_stats_csv(path.toStdString(), stats_, trace_ ? step_length_ns(*trace_) : 0);
    return true;
  } catch (const std::exception& e) {
    if (error) *error = QString::fromStdString(e.what());
    return false;
  }
}

void OpStatsTable::exportClicked() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export op statistics"), "op_stats.csv", tr("CSV (*.csv)"));
  if (path.isEmpty()) return;
  QString err;
  if (!exportCsv(path, &err)) QMessageBox::warning(this, tr("Export failed"), err);
}

}  // namespace remat::gui
