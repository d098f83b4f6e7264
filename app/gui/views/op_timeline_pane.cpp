#include "views/op_timeline_pane.h"

#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QScrollArea>
#include <QShortcut>
#include <QTabWidget>
#include <QToolButton>
#include <QVBoxLayout>

#include "format.h"
#include "shortcuts.h"
#include "views/op_stats_table.h"
#include "views/op_timeline_view.h"
#include "views/run_view_data.h"

namespace remat::gui {

OpTimelinePane::OpTimelinePane(QWidget* parent)
    : QWidget(parent),
      view_(new OpTimelineView(this)),
      search_(new QLineEdit(this)),
      prev_(new QToolButton(this)),
      next_(new QToolButton(this)),
      match_(new QLabel(this)),
      tabs_(new QTabWidget(this)),
      details_(new QLabel),
      range_(new OpStatsTable),
      stats_(new OpStatsTable) {
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  l->setSpacing(2);
  auto* bar = new QHBoxLayout;
  bar->setContentsMargins(6, 0, 6, 0);
  search_->setPlaceholderText(tr("Find op by name (Ctrl+F)"));
  search_->setClearButtonEnabled(true);
  search_->setMinimumWidth(240);
  search_->setMaximumWidth(360);
  search_->installEventFilter(this);
  prev_->setArrowType(Qt::UpArrow);
  prev_->setToolTip(tr("Previous match (Shift+Enter)"));
  next_->setArrowType(Qt::DownArrow);
  next_->setToolTip(tr("Next match (Enter)"));
  bar->addWidget(search_);
  bar->addWidget(prev_);
  bar->addWidget(next_);
  bar->addWidget(match_);
  bar->addStretch(1);
  l->addLayout(bar);

  l->addWidget(view_, 1);
  // The side panel goes where the owner puts it (RunView: right of all three plots, so the
  // plots keep one width and their time axes stay aligned to the pixel).
  details_->setTextFormat(Qt::RichText);
  details_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  details_->setWordWrap(true);
  details_->setContentsMargins(6, 4, 6, 4);
  auto* scroll = new QScrollArea(tabs_);
  scroll->setWidget(details_);
  scroll->setWidgetResizable(true);
  tabs_->addTab(scroll, tr("Details"));
  tabs_->addTab(range_, tr("Selection"));
  tabs_->addTab(stats_, tr("Statistics"));

  auto* find = new QShortcut(shortcut_key("find"), this);
  find->setContext(Qt::WindowShortcut);
  connect(find, &QShortcut::activated, this, [this] {
    search_->setFocus(Qt::ShortcutFocusReason);
    search_->selectAll();
  });
  connect(search_, &QLineEdit::textChanged, view_, [this](const QString& s) { view_->find(s); });
  connect(prev_, &QToolButton::clicked, view_, &OpTimelineView::previous);
  connect(next_, &QToolButton::clicked, view_, &OpTimelineView::next);
  connect(view_, &OpTimelineView::matchChanged, this, &OpTimelinePane::showMatch);
  connect(view_, &OpTimelineView::sliceSelected, this, [this](int track, int slice) {
    details_->setText(view_->sliceDetails(track, slice));
    if (track >= 0) tabs_->setCurrentIndex(0);
  });
  connect(view_, &OpTimelineView::rangeSelected, this, &OpTimelinePane::showRange);
  showMatch(-1, 0);
}

void OpTimelinePane::setTrace(std::shared_ptr<const Trace> t, std::int64_t origin, std::int64_t duration) {
  trace_ = t;
  view_->setTrace(t, origin, duration);
  stats_->setTrace(t);
  shown();
}

void OpTimelinePane::setData(const RunViewData& d, std::int64_t origin, std::int64_t duration) {
  trace_ = d.trace;
  view_->setData(d.trace, d.slices, origin, duration);
  stats_->setStats(d.trace, d.stats ? *d.stats : std::vector<OpStat>{});
  shown();
}

void OpTimelinePane::shown() {
  const Trace* t = trace_.get();
  details_->setText(view_->sliceDetails(-1, -1));
  stats_->setNote(t ? tr("%1 ops, step %2").arg(t->ops.size()).arg(human_time_ns(static_cast<double>(step_length_ns(*t))))
                    : QString());
  showRange(0, -1);
  if (!search_->text().isEmpty()) view_->find(search_->text());
}

QWidget* OpTimelinePane::sidePanel() const { return tabs_; }

bool OpTimelinePane::eventFilter(QObject* o, QEvent* e) {
  if (o == search_ && e->type() == QEvent::KeyPress) {
    auto* k = static_cast<QKeyEvent*>(e);
    if (k->key() == Qt::Key_Return || k->key() == Qt::Key_Enter) {
      if (k->modifiers().testFlag(Qt::ShiftModifier))
        view_->previous();
      else
        view_->next();
      return true;
    }
  }
  return QWidget::eventFilter(o, e);
}

void OpTimelinePane::showMatch(int current, int count) {
  prev_->setEnabled(count > 0);
  next_->setEnabled(count > 0);
  if (search_->text().trimmed().isEmpty())
    match_->clear();
  else if (count == 0)
    match_->setText(tr("no match"));
  else
    match_->setText(current < 0 ? tr("%1 matches").arg(count) : tr("%1 of %2").arg(current + 1).arg(count));
}

void OpTimelinePane::showRange(qint64 t0, qint64 t1) {
  if (t1 < t0 || !trace_) {
    range_->setTrace(nullptr);
    range_->setNote(tr("<i>Shift+drag over the timeline to select a time range.</i>"));
    return;
  }
  OpStatsFilter f;
  f.t0 = t0;
  f.t1 = t1;
  range_->setTrace(trace_, f);
  std::uint64_t n = 0;
  for (const OpStat& s : range_->stats()) n += s.count;
  range_->setNote(tr("%1 ops in %2").arg(n).arg(human_time_ns(static_cast<double>(t1 - t0))));
  tabs_->setCurrentIndex(1);
}

}  // namespace remat::gui
