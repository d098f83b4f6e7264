#include "views/plot_labels.h"

#include <QFontMetrics>
#include <cmath>
#include <qcustomplot.h>
#include <vector>

namespace remat::gui {

namespace {

constexpr int kGap = 6;      // between a point and its label
constexpr int kLineGap = 2;  // between a line and its label

struct Placement {
  Qt::Alignment align;
  QMargins pad;
  QPointF anchor;
  QRectF box;
};

bool inside(const QRectF& outer, const QRectF& r) {
  return r.left() >= outer.left() && r.right() <= outer.right() && r.top() >= outer.top() &&
         r.bottom() <= outer.bottom();
}

void apply(QCPItemText* t, const Placement& p) {
  // Below its point or line a label lies over the curves: on a backing of the plot's base color.
  QColor back = t->parentPlot()->palette().color(QPalette::Base);
  back.setAlpha(210);
  t->setBrush(p.align.testFlag(Qt::AlignTop) ? QBrush(back) : QBrush(Qt::NoBrush));
  t->setPen(Qt::NoPen);
  t->setPositionAlignment(p.align);
  t->setPadding(p.pad);
  t->position->setPixelPosition(p.anchor);
}

// `p`'s box moved the least to lie inside `area` (as far as it can).
Placement clamped(Placement p, const QRectF& area) {
  double dx = 0, dy = 0;
  if (p.box.right() > area.right()) dx = area.right() - p.box.right();
  if (p.box.left() + dx < area.left()) dx = area.left() - p.box.left();
  if (p.box.bottom() > area.bottom()) dy = area.bottom() - p.box.bottom();
  if (p.box.top() + dy < area.top()) dy = area.top() - p.box.top();
  p.anchor += QPointF(dx, dy);
  p.box.translate(dx, dy);
  return p;
}

Placement make(const QCPItemText* t, QPointF anchor, Qt::Alignment align, QMargins pad) {
  return {align, pad, anchor, text_box(t, anchor, align, pad)};
}

}  // namespace

QRectF text_box(const QCPItemText* t, QPointF anchor, Qt::Alignment align, const QMargins& pad) {
  // As QCPItemText draws it: the text's size, padded, with the position alignment's corner of
  // the padded box at the anchor (rounded to whole pixels).
  const QRect text = QFontMetrics(t->font()).boundingRect(0, 0, 0, 0, Qt::TextDontClip | t->textAlignment(), t->text());
  const QSize box(text.width() + pad.left() + pad.right(), text.height() + pad.top() + pad.bottom());
  QPointF tl(0, 0);
  if (align.testFlag(Qt::AlignHCenter))
    tl.rx() -= box.width() / 2.0;
  else if (align.testFlag(Qt::AlignRight))
    tl.rx() -= box.width();
  if (align.testFlag(Qt::AlignVCenter))
    tl.ry() -= box.height() / 2.0;
  else if (align.testFlag(Qt::AlignBottom))
    tl.ry() -= box.height();
  return QRectF(anchor + QPointF(tl.toPoint()), QSizeF(box));
}

void place_value_labels(QCPItemText* point_label, QPointF point, QCPItemText* line_label, double line_y,
                        const QRectF& area) {
  QRectF taken;
  if (point_label && point_label->visible()) {
    const std::vector<Placement> tries = {
        make(point_label, point, Qt::AlignLeft | Qt::AlignBottom, QMargins(kGap, 0, 0, kGap / 2)),
        make(point_label, point, Qt::AlignRight | Qt::AlignBottom, QMargins(0, 0, kGap, kGap / 2)),
        make(point_label, point, Qt::AlignLeft | Qt::AlignTop, QMargins(kGap, kGap / 2, 0, 0)),
        make(point_label, point, Qt::AlignRight | Qt::AlignTop, QMargins(0, kGap / 2, kGap, 0)),
    };
    Placement best = clamped(tries[0], area);
    for (const Placement& p : tries)
      if (inside(area, p.box)) {
        best = p;
        break;
      }
    apply(point_label, best);
    taken = best.box;
  }
  if (!line_label || !line_label->visible()) return;
  const QPointF end(area.right(), line_y);
  const Qt::Alignment above = Qt::AlignRight | Qt::AlignBottom, below = Qt::AlignRight | Qt::AlignTop;
  const QMargins pad_above(0, 0, 4, kLineGap), pad_below(0, kLineGap, 4, 0);
  std::vector<Placement> tries = {make(line_label, end, above, pad_above), make(line_label, end, below, pad_below)};
  if (!taken.isNull()) {  // over or under the first label, at the same right end
    tries.push_back(make(line_label, QPointF(end.x(), taken.top() - 2), above, pad_above));
    tries.push_back(make(line_label, QPointF(end.x(), taken.bottom() + 2), below, pad_below));
  }
  const auto free = [&](const Placement& p) { return inside(area, p.box) && !p.box.intersects(taken); };
  for (const Placement& p : tries)
    if (free(p)) {
      apply(line_label, p);
      return;
    }
  apply(line_label, clamped(tries[0], area));
}

}  // namespace remat::gui
