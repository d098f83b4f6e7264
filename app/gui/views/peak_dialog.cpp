#include "views/peak_dialog.h"

#include <QDialogButtonBox>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

#include "format.h"

namespace remat::gui {

namespace {

enum Column { kTensor, kBytes, kCategory, kBlock, kAllocated, kFreed, kWhy, kColumns };

// A cell that sorts by its Qt::UserRole number when both have one.
class SortedItem : public QTableWidgetItem {
 public:
  using QTableWidgetItem::QTableWidgetItem;
  bool operator<(const QTableWidgetItem& o) const override {
    const QVariant a = data(Qt::UserRole), b = o.data(Qt::UserRole);
    if (a.isValid() && b.isValid()) return a.toDouble() < b.toDouble();
    return QTableWidgetItem::operator<(o);
  }
};

QTableWidgetItem* number(const QString& text, double key) {
  auto* i = new SortedItem(text);
  i->setData(Qt::UserRole, key);
  i->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return i;
}

}  // namespace

QString peak_alive_summary(const PeakAlive& p, std::int64_t origin) {
  if (!p.found) return QObject::tr("The run has no memory events: no peak to list.");
  const qsizetype n = static_cast<qsizetype>(p.tensors.size());
  const QString bytes = human_bytes(static_cast<double>(p.sum_bytes));
  QString s = n == 1 ? QObject::tr("1 tensor alive at the peak: %1").arg(bytes)
                     : QObject::tr("%1 tensors alive at the peak: %2").arg(n).arg(bytes);
  if (p.sum_bytes == p.peak_bytes)
    s += QObject::tr(", the peak exactly");
  else
    s += QObject::tr(" against the peak's %1 (%2 B apart: the trace frees memory it never recorded allocated)")
             .arg(human_bytes(static_cast<double>(p.peak_bytes)))
             .arg(static_cast<qint64>(p.peak_bytes) - static_cast<qint64>(p.sum_bytes));
  s += QObject::tr(" · at %1").arg(human_time_ns(static_cast<double>(p.t_ns - origin)));
  if (!p.op.empty()) s += QObject::tr(", during %1 (%2)").arg(QString::fromStdString(p.op), phase_name(p.phase));
  return s;
}

PeakAliveDialog::PeakAliveDialog(const Trace& t, std::int64_t origin, QWidget* parent)
    : QDialog(parent), peak_(peak_alive(t)), header_(new QLabel(this)), table_(new QTableWidget(this)) {
  setWindowTitle(tr("Alive at the peak"));
  auto* l = new QVBoxLayout(this);
  header_->setText(peak_alive_summary(peak_, origin));
  header_->setWordWrap(true);
  header_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  l->addWidget(header_);
  table_->setColumnCount(kColumns);
  table_->setHorizontalHeaderLabels(
      {tr("tensor"), tr("bytes"), tr("category"), tr("block"), tr("allocated"), tr("freed"), tr("why alive")});
  table_->setRowCount(static_cast<int>(peak_.tensors.size()));
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->verticalHeader()->setVisible(false);
  for (int r = 0; r < table_->rowCount(); ++r) {
    const PeakTensor& x = peak_.tensors[static_cast<std::size_t>(r)];
    table_->setItem(r, kTensor, new QTableWidgetItem(QString::fromStdString(x.label)));
    table_->setItem(r, kBytes, number(human_bytes(static_cast<double>(x.bytes)), static_cast<double>(x.bytes)));
    table_->item(r, kBytes)->setToolTip(QString("%1 B").arg(x.bytes));
    table_->setItem(r, kCategory, new QTableWidgetItem(category_name(x.category)));
    table_->setItem(r, kBlock, number(x.block >= 0 ? QString::fromStdString(x.label).section('.', 0, 0) : QString("–"), x.block));
    table_->setItem(r, kAllocated,
                    number(QString("%1 · %2").arg(phase_name(x.phase), human_time_ns(static_cast<double>(x.alloc_ns - origin))),
                           static_cast<double>(x.alloc_ns)));
    table_->setItem(r, kFreed, number(x.free_ns >= 0 ? human_time_ns(static_cast<double>(x.free_ns - origin)) : tr("never"),
                                      x.free_ns >= 0 ? static_cast<double>(x.free_ns) : 1e300));
    table_->setItem(r, kWhy, new QTableWidgetItem(QString::fromStdString(x.why)));
    table_->item(r, kWhy)->setToolTip(QString::fromStdString(x.why));
  }
  table_->setSortingEnabled(true);
  table_->sortByColumn(kBytes, Qt::DescendingOrder);
  table_->resizeColumnsToContents();
  table_->horizontalHeader()->setStretchLastSection(true);
  l->addWidget(table_, 1);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  l->addWidget(buttons);
  resize(1180, 560);
}

}  // namespace remat::gui
