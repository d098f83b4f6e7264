// The allocations mode of the memory timeline: the mode buttons, the bands built on first use,
// the hover text and the pinned details of an allocation.
#include <QButtonGroup>
#include <QHBoxLayout>
#include <QLabel>
#include <QToolButton>
#include <qcustomplot.h>
#include <tuple>

#include "views/alloc_bands_plottable.h"
#include "views/memory_timeline_view.h"

namespace remat::gui {

void MemoryTimelineView::addModeButtons(QHBoxLayout* bar) {
  auto* modes = new QButtonGroup(focus_bar_);
  for (auto [button, text, tip, mode] :
       {std::tuple{&stacked_button_, tr("Stacked categories"), tr("Live bytes stacked by category"), MemoryMode::Stacked},
        std::tuple{&allocations_button_, tr("Allocations"),
                   tr("Each live allocation its own band, stacked in allocation order; hover for its details, "
                      "click to pin them"),
                   MemoryMode::Allocations}}) {
    *button = new QToolButton(focus_bar_);
    (*button)->setText(text);
    (*button)->setToolTip(tip);
    (*button)->setCheckable(true);
    modes->addButton(*button);
    bar->addWidget(*button);
    connect(*button, &QToolButton::clicked, this, [this, m = mode] { setMemoryMode(m); });
  }
  stacked_button_->setChecked(true);
}

void MemoryTimelineView::showAllocations() {
  if (trace_ && !bands_->bands()) bands_->setBands(std::make_shared<const AllocBands>(*trace_));
}

void MemoryTimelineView::setMemoryMode(MemoryMode m) {
  QSignalBlocker a(stacked_button_), b(allocations_button_);
  stacked_button_->setChecked(m == MemoryMode::Stacked);
  allocations_button_->setChecked(m == MemoryMode::Allocations);
  if (m == memory_mode_) return;
  memory_mode_ = m;
  if (m == MemoryMode::Allocations) showAllocations();
  bands_->setPinned(AllocBands::npos);
  pinned_->clear();
  pinned_->setVisible(false);
  applyFocus();
}

QString MemoryTimelineView::describeAllocationAt(const QPointF& pos) const {
  if (memory_mode_ != MemoryMode::Allocations || !plot_->axisRect()->rect().contains(pos.toPoint())) return {};
  return bands_->describe(bands_->hitAt(pos));
}

void MemoryTimelineView::pinAllocationAt(const QPointF& pos) {
  const BandHit h = memory_mode_ == MemoryMode::Allocations ? bands_->hitAt(pos) : BandHit{};
  bands_->setPinned(h.kind == BandHit::Band ? h.band : AllocBands::npos);
  pinned_->setText(h.kind == BandHit::Band ? bands_->describe(h).replace("<br>", " · ") : QString());
  pinned_->setVisible(h.kind == BandHit::Band);
  plot_->replot();
  if (h.kind == BandHit::Band) {
    const AllocBand& b = bands_->bands()->bands()[h.band];
    emit tensorsPicked({{b.a.block, QString::fromStdString(bands_->bands()->tensorName(b))}}, b.alloc_ns);
  }
}

std::optional<std::pair<double, double>> MemoryTimelineView::selection() const {
  if (!bands_ || !bands_->bands() || bands_->pinned() == AllocBands::npos) return std::nullopt;
  const AllocBand& b = bands_->bands()->bands()[bands_->pinned()];
  const std::int64_t end = b.free_ns >= 0 ? b.free_ns : origin_ + duration_;
  const double s = timeScale();
  return std::pair{static_cast<double>(b.alloc_ns - origin_) * s, static_cast<double>(end - origin_) * s};
}

}  // namespace remat::gui
