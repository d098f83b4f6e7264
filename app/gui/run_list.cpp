#include "run_list.h"

#include "core/analysis/run_layout.h"

#include <QDir>
#include <QPainter>
#include <QPixmap>

#include "format.h"
#include "theme.h"

namespace remat::gui {

namespace {

QPixmap swatch(const QColor& c) {
  QPixmap pm(12, 12);
  pm.fill(Qt::transparent);
  QPainter p(&pm);
  p.setRenderHint(QPainter::Antialiasing);
  p.setPen(c.darker(130));
  p.setBrush(c);
  p.drawRoundedRect(QRectF(0.5, 0.5, 11, 11), 3, 3);
  return pm;
}

}  // namespace

QString incomplete_state(const Trace& t) {
  if (t.complete) return {};
  if (t.status == "cancelled") return QObject::tr("cancelled");
  if (t.status == "out_of_memory") return QObject::tr("out of memory");
  return QObject::tr("failed");
}

int RunListModel::add(std::shared_ptr<const Trace> trace, const QString& dir) {
  const int row = static_cast<int>(runs_.size());
  beginInsertRows({}, row, row);
  RunEntry e;
  e.trace = std::move(trace);
  e.dir = dir;
  e.id = next_id_++;
  const Trace& t = *e.trace;
  e.label = QString("#%1 %2 · %3").arg(e.id).arg(QString::fromStdString(t.model.name), QString::fromStdString(t.policy));
  // A rank of a run of several ranks says its layout and rank: "tp 2 sp, rank 1".
  const std::string where = rank_label(run_layout(t));
  if (!where.empty()) e.label += " · " + QString::fromStdString(where);
  const QString state = incomplete_state(t);
  if (!state.isEmpty()) e.label += " (" + state + ")";
  runs_.push_back(std::move(e));
  // An incomplete trace is never compared unasked, nor an imported one (no model of ours to
  // compare it with; it is its own group when checked).
  checked_.push_back(t.complete && !t.imported());
  endInsertRows();
  emit checkedChanged();
  return row;
}

void RunListModel::remove(int row) {
  if (row < 0 || row >= rowCount()) return;
  beginRemoveRows({}, row, row);
  runs_.erase(runs_.begin() + row);
  checked_.erase(checked_.begin() + row);
  endRemoveRows();
  emit checkedChanged();
}

std::vector<RunEntry> RunListModel::checked() const {
  std::vector<RunEntry> out;
  for (std::size_t i = 0; i < runs_.size(); ++i)
    if (checked_[i]) out.push_back(runs_[i]);
  return out;
}

void RunListModel::setChecked(int row, bool on) {
  if (row < 0 || row >= rowCount() || checked_[static_cast<std::size_t>(row)] == on) return;
  checked_[static_cast<std::size_t>(row)] = on;
  emit dataChanged(index(row), index(row), {Qt::CheckStateRole});
  emit checkedChanged();
}

int RunListModel::findDir(const QString& dir) const {
  const QString want = QDir(dir).absolutePath();
  for (std::size_t i = 0; i < runs_.size(); ++i)
    if (!runs_[i].dir.isEmpty() && QDir(runs_[i].dir).absolutePath() == want) return static_cast<int>(i);
  return -1;
}

int RunListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(runs_.size());
}

QVariant RunListModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const RunEntry& e = runs_[static_cast<std::size_t>(index.row())];
  const Trace& t = *e.trace;
  switch (role) {
    case Qt::DisplayRole: {
      QString s = e.label + "\n";
      if (t.complete)
        s += human_bytes(static_cast<double>(t.peak_bytes)) + " · " + QString::number(t.median_step_ms(), 'f', 2) + " ms";
      else
        s += QString::fromStdString(t.status);
      return s;
    }
    case Qt::CheckStateRole: return checked_[static_cast<std::size_t>(index.row())] ? Qt::Checked : Qt::Unchecked;
    case Qt::DecorationRole: return swatch(policy_color(t.policy));
    case Qt::ForegroundRole:
      if (!t.complete) return QColor(0xd6, 0x27, 0x28);
      return {};
    case Qt::ToolTipRole: {
      QString s = QString("<b>%1</b><br>model %2 (%3, %4 blocks, h=%5, s=%6, b=%7)<br>policy %8%9 on %10<br>seed %11, %12 steps after %13 warmup")
                      .arg(e.label.toHtmlEscaped(), QString::fromStdString(t.model.name), to_string(t.model.family))
                      .arg(t.model.layers).arg(t.model.hidden).arg(t.model.seq).arg(t.model.batch)
                      .arg(QString::fromStdString(t.policy),
                           t.policy_params.empty() ? QString() : ":" + QString::fromStdString(t.policy_params),
                           QString::fromStdString(t.device))
                      .arg(t.seed).arg(t.steps).arg(t.warmup);
      if (!t.complete)
        s += "<br><b>" + incomplete_state(t) + "</b>: " + QString::fromStdString(t.error).toHtmlEscaped() +
             "<br>" + QObject::tr("The trace is incomplete: not checked for comparison unless you check it.");
      if (!e.dir.isEmpty()) s += "<br>" + e.dir.toHtmlEscaped();
      return s;
    }
    default: return {};
  }
}

bool RunListModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (!index.isValid() || role != Qt::CheckStateRole) return false;
  setChecked(index.row(), value.toInt() == Qt::Checked);
  return true;
}

Qt::ItemFlags RunListModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  return Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsUserCheckable;
}

}  // namespace remat::gui
