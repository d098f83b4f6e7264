#include "views/diff_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <cstdlib>
#include <qcustomplot.h>

#include "format.h"
#include "theme.h"
#include "views/span_plottable.h"

namespace remat::gui {

namespace {

constexpr int kRowA = 0, kRowB = 1;

// A matched op counts as changed in time when it moved by at least this share of A's time and
// at least a microsecond (below that, timer noise).
bool changed(const DiffRow& r) {
  if (r.status != DiffStatus::Matched) return true;
  const std::int64_t d = std::llabs(r.delta_ns());
  return d >= 1000 && d * 5 >= r.a_ns;
}

QString signed_time(std::int64_t ns) {
  return (ns > 0 ? "+" : ns < 0 ? "−" : "") + human_time_ns(static_cast<double>(std::llabs(ns)));
}

}  // namespace

QString diff_summary(const OpDiff& d) {
  QStringList parts;
  parts << QObject::tr("%1 ops matched, %2 added, %3 removed").arg(d.matched).arg(d.added).arg(d.removed);
  for (int p = 0; p < kNumPhases; ++p) {
    const PhaseDiff& x = d.phases[static_cast<std::size_t>(p)];
    QStringList what;
    if (x.added) what << QObject::tr("+%1 ops (%2)").arg(x.added).arg(signed_time(x.added_ns));
    if (x.removed) what << QObject::tr("−%1 ops (%2)").arg(x.removed).arg(signed_time(-x.removed_ns));
    if (std::llabs(x.matched_delta_ns) >= 1000)
      what << QObject::tr("%1 on matched ops").arg(signed_time(x.matched_delta_ns));
    if (!what.isEmpty()) parts << phase_name(static_cast<Phase>(p)) + ": " + what.join(", ");
  }
  parts << QObject::tr("step %1 → %2")
               .arg(human_time_ns(static_cast<double>(d.a_step_ns)), human_time_ns(static_cast<double>(d.b_step_ns)));
  for (const std::string& n : d.notes) parts << QString::fromStdString(n);
  return parts.join(" · ");
}

// ---- DiffLanes

DiffLanes::DiffLanes(QWidget* parent) : SpanTimelineView(parent) {
  plot_->xAxis->setLabel(tr("time in each run's step"));
  plot_->setMinimumHeight(110);
  bars()->setBarHeight(0.7);
}

QColor DiffLanes::statusColor(DiffStatus s) {
  switch (s) {
    case DiffStatus::Matched: return QColor(0x8c, 0x8c, 0x8c);
    case DiffStatus::Added: return QColor(0xf2, 0x8e, 0x2b);
    case DiffStatus::Removed: return QColor(0xe1, 0x57, 0x59);
  }
  return {};
}

void DiffLanes::setDiff(std::shared_ptr<const OpDiff> d, const QString& a, const QString& b) {
  diff_ = std::move(d);
  std::vector<std::vector<Span>> rows(2);
  std::int64_t duration = 1;
  if (diff_) {
    for (std::size_t i = 0; i < diff_->rows.size(); ++i) {
      const DiffRow& r = diff_->rows[i];
      if (r.stream != Stream::Compute) continue;
      const auto color = static_cast<std::uint8_t>(r.status);
      if (r.a >= 0) rows[kRowA].push_back({r.a_start, r.a_start + r.a_ns, static_cast<std::uint32_t>(i), color});
      if (r.b >= 0) rows[kRowB].push_back({r.b_start, r.b_start + r.b_ns, static_cast<std::uint32_t>(i), color});
    }
    for (auto& row : rows)
      std::stable_sort(row.begin(), row.end(), [](const Span& x, const Span& y) { return x.start < y.start; });
    duration = std::max<std::int64_t>({diff_->a_step_ns, diff_->b_step_ns, 1});
  }
  QVector<QColor> colors;
  QStringList names;
  for (DiffStatus s : {DiffStatus::Matched, DiffStatus::Added, DiffStatus::Removed}) {
    colors << statusColor(s);
    names << (s == DiffStatus::Matched ? tr("in both") : s == DiffStatus::Added ? tr("added in B") : tr("removed in B"));
  }
  setTimeAxis(0, duration);
  // The rows say A and B (the runs are named over the lanes and in the tooltip).
  setRows(std::make_shared<const SpanRows>(std::move(rows)), {tr("A"), tr("B")}, colors, names, colors);
  a_name_ = a;
  b_name_ = b;
}

QString DiffLanes::describe(const Span& s, int) const {
  if (!diff_ || s.index >= diff_->rows.size()) return {};
  const DiffRow& r = diff_->rows[s.index];
  QString h = QString("<b>%1</b> · %2 · %3").arg(QString::fromStdString(r.name).toHtmlEscaped(),
                                                 QString::fromLatin1(to_string(r.status)), phase_name(r.phase));
  if (r.a >= 0) h += "<br>A (" + a_name_.toHtmlEscaped() + "): " + human_time_ns(static_cast<double>(r.a_ns)) + " at " + human_time_ns(static_cast<double>(r.a_start));
  if (r.b >= 0) h += "<br>B (" + b_name_.toHtmlEscaped() + "): " + human_time_ns(static_cast<double>(r.b_ns)) + " at " + human_time_ns(static_cast<double>(r.b_start));
  if (r.a >= 0 && r.b >= 0) h += "<br>B − A: " + signed_time(r.delta_ns());
  return h;
}

// ---- DiffTableModel

void DiffTableModel::setDiff(std::shared_ptr<const OpDiff> d, bool changes_only) {
  beginResetModel();
  diff_ = std::move(d);
  shown_.clear();
  if (diff_)
    for (std::size_t i = 0; i < diff_->rows.size(); ++i)
      if (!changes_only || changed(diff_->rows[i])) shown_.push_back(i);
  endResetModel();
}

int DiffTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(shown_.size());
}

int DiffTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : Columns; }

QVariant DiffTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const DiffRow& r = diffRow(index.row());
  if (role == Qt::ForegroundRole && index.column() == Status && r.status != DiffStatus::Matched)
    return DiffLanes::statusColor(r.status).darker(120);
  if (role == Qt::TextAlignmentRole && index.column() >= AStart)
    return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
  if (role != Qt::DisplayRole) return {};
  auto time = [](bool has, std::int64_t ns) { return has ? human_time_ns(static_cast<double>(ns)) : QString("–"); };
  switch (index.column()) {
    case Status: return QString::fromLatin1(to_string(r.status));
    case Phase_: return phase_name(r.phase);
    case Block: return r.block >= 0 ? QString("h%1").arg(r.block) : QString("–");
    case Name: return QString::fromStdString(r.name);
    case AStart: return time(r.a >= 0, r.a_start);
    case ATime: return time(r.a >= 0, r.a_ns);
    case BStart: return time(r.b >= 0, r.b_start);
    case BTime: return time(r.b >= 0, r.b_ns);
    case Delta: return signed_time(r.delta_ns());
    default: return {};
  }
}

QVariant DiffTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  static const char* names[] = {"status", "phase", "block", "op", "A start", "A time", "B start", "B time", "B − A"};
  return section >= 0 && section < Columns ? tr(names[section]) : QVariant();
}

// ---- DiffView

DiffView::DiffView(QWidget* parent)
    : QWidget(parent),
      a_(new QComboBox(this)),
      b_(new QComboBox(this)),
      changes_(new QCheckBox(tr("Changes only"), this)),
      summary_(new QLabel(this)),
      lanes_(new DiffLanes(this)),
      table_(new QTableView(this)),
      model_(new DiffTableModel(this)) {
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("A"), this));
  bar->addWidget(a_, 1);
  bar->addSpacing(12);
  bar->addWidget(new QLabel(tr("B"), this));
  bar->addWidget(b_, 1);
  bar->addSpacing(12);
  bar->addWidget(changes_);
  changes_->setToolTip(tr("Only the ops B added or removed, and those whose time changed by 20 % and at least 1 µs"));
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  table_->setModel(model_);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 4);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->horizontalHeader()->setSectionResizeMode(DiffTableModel::Name, QHeaderView::Stretch);
  // Widths from the font (sizing to the contents would read every row of a million-op diff).
  const QFontMetrics fm = table_->fontMetrics();
  const int time_w = fm.horizontalAdvance(QStringLiteral("−888.88 ms")) + 16;
  for (int c = DiffTableModel::AStart; c <= DiffTableModel::Delta; ++c) table_->setColumnWidth(c, time_w);
  table_->setColumnWidth(DiffTableModel::Status, fm.horizontalAdvance(QStringLiteral("removed")) + 16);
  table_->setColumnWidth(DiffTableModel::Phase_, fm.horizontalAdvance(QStringLiteral("recompute")) + 16);
  table_->setColumnWidth(DiffTableModel::Block, fm.horizontalAdvance(QStringLiteral("h888")) + 16);
  split_ = new QSplitter(Qt::Vertical, this);
  split_->addWidget(lanes_);
  split_->addWidget(table_);
  split_->setStretchFactor(0, 1);
  split_->setStretchFactor(1, 2);
  split_->setSizes({220, 440});
  split_->setChildrenCollapsible(false);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(6, 6, 6, 6);
  l->addLayout(bar);
  l->addWidget(summary_);
  l->addWidget(split_, 1);
  auto again = [this] { diff(a_->currentIndex(), b_->currentIndex()); };
  connect(a_, qOverload<int>(&QComboBox::activated), this, again);
  connect(b_, qOverload<int>(&QComboBox::activated), this, again);
  connect(changes_, &QCheckBox::toggled, this, [this](bool on) { model_->setDiff(diff_, on); });
  // A click on a row brings its op into view on the lanes.
  connect(table_, &QTableView::clicked, this, [this](const QModelIndex& i) {
    const DiffRow& r = model_->diffRow(i.row());
    const std::int64_t s = r.a >= 0 ? r.a_start : r.b_start, n = r.a >= 0 ? r.a_ns : r.b_ns;
    const double pad = std::max<double>(static_cast<double>(n), 1000.0) * 4;
    lanes_->plot()->xAxis->setRange(static_cast<double>(s) - pad, static_cast<double>(s + n) + pad);
    lanes_->plot()->replot();
  });
  showResult(nullptr, tr("Two runs of the list, diffed op by op, show here."));
}

void DiffView::setRuns(const std::vector<RunEntry>& runs, int current) {
  // A stays what it was while that run is in the list; B follows the current run.
  const Trace* old_a = a_->currentIndex() >= 0 && a_->currentIndex() < static_cast<int>(runs_.size())
                           ? runs_[static_cast<std::size_t>(a_->currentIndex())].trace.get()
                           : nullptr;
  runs_ = runs;
  const QSignalBlocker block_a(a_), block_b(b_);
  a_->clear();
  b_->clear();
  for (const RunEntry& e : runs_) {
    a_->addItem(e.label);
    b_->addItem(e.label);
  }
  const int n = static_cast<int>(runs_.size());
  const int b = current >= 0 && current < n ? current : n - 1;
  int a = -1;
  for (int i = 0; i < n && old_a; ++i)
    if (i != b && runs_[static_cast<std::size_t>(i)].trace.get() == old_a) a = i;
  // Else the first `none` run B can be diffed against, else the run before B.
  for (int i = 0; i < n && a < 0 && b >= 0; ++i)
    if (i != b && runs_[static_cast<std::size_t>(i)].trace->policy == "none" &&
        diff_refusal(*runs_[static_cast<std::size_t>(i)].trace, *runs_[static_cast<std::size_t>(b)].trace).empty())
      a = i;
  if (a < 0 && b >= 0) a = b > 0 ? b - 1 : (n > 1 ? 1 : -1);
  a_->setCurrentIndex(a);
  b_->setCurrentIndex(b);
  const bool same = diff_ && a >= 0 && b >= 0 && runs_[static_cast<std::size_t>(a)].trace == diffed_a_ &&
                    runs_[static_cast<std::size_t>(b)].trace == diffed_b_;
  if (same) {
    lanes_->setDiff(diff_, a_->currentText(), b_->currentText());  // the labels may have changed
    return;
  }
  dirty_ = true;
  if (isVisible()) diff(a, b);
}

void DiffView::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (dirty_) diff(a_->currentIndex(), b_->currentIndex());
}

void DiffView::diff(int a, int b) {
  dirty_ = false;
  const int n = static_cast<int>(runs_.size());
  const std::uint64_t gen = ++generation_;
  if (a < 0 || b < 0 || a >= n || b >= n || a == b) {
    busy_ = false;
    diffed_a_ = diffed_b_ = nullptr;
    showResult(nullptr, n < 2 ? tr("Two runs of the list, diffed op by op, show here.") : tr("Pick two different runs."));
    return;
  }
  a_->setCurrentIndex(a);
  b_->setCurrentIndex(b);
  const auto ta = runs_[static_cast<std::size_t>(a)].trace, tb = runs_[static_cast<std::size_t>(b)].trace;
  diffed_a_ = ta;
  diffed_b_ = tb;
  busy_ = true;
  summary_->setText(tr("Diffing…"));
  using Result = std::pair<std::shared_ptr<const OpDiff>, QString>;
  auto* watcher = new QFutureWatcher<Result>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, gen] {
    const Result r = watcher->result();
    watcher->deleteLater();
    if (gen != generation_) return;  // overtaken by another choice
    busy_ = false;
    showResult(r.first, r.second);
  });
  watcher->setFuture(QtConcurrent::run([ta, tb]() -> Result {
    try {
      return {std::make_shared<const OpDiff>(op_diff(*ta, *tb)), QString()};
    } catch (const std::bad_alloc&) {
      return {nullptr, QStringLiteral("out of memory while diffing the runs")};
    } catch (const std::exception& e) {
      return {nullptr, QString::fromStdString(e.what())};
    }
  }));
}

void DiffView::showResult(std::shared_ptr<const OpDiff> d, const QString& error) {
  diff_ = std::move(d);
  summary_->setText(diff_ ? diff_summary(*diff_) : error);
  lanes_->setDiff(diff_, a_->currentText(), b_->currentText());
  split_->setVisible(diff_ != nullptr);
  model_->setDiff(diff_, changes_->isChecked());
  emit diffShown();
}

}  // namespace remat::gui
