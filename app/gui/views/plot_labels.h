// Labels of marked values on a plot (the memory timeline's peak and predicted peak): each label's
// box in pixels as QCustomPlot draws it, and a placement that keeps the boxes inside the axis
// rect and apart, flipping a label to the other side of its point near an edge and moving the
// second label up or down when the two would overlap.
#pragma once
#include <QMargins>
#include <QPointF>
#include <QRectF>
#include <Qt>

class QCPItemText;

namespace remat::gui {

// The box `t` is drawn in when its position is at pixel `anchor` with this alignment and padding.
QRectF text_box(const QCPItemText* t, QPointF anchor, Qt::Alignment align, const QMargins& pad);

// Places `point_label` beside the point at pixel `point` (above and right of it, else left, else
// below) and `line_label` (may be null) at the right end of a horizontal line at pixel height
// `line_y` (above it, else below, else above or below the first label), both inside `area`.
void place_value_labels(QCPItemText* point_label, QPointF point, QCPItemText* line_label, double line_y,
                        const QRectF& area);

}  // namespace remat::gui
