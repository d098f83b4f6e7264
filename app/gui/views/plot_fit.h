// Text of a plot that keeps to the plot's width: a legend's entries laid out in as many columns
// as fit side by side (the rest wrap to further rows), and a title broken into lines at spaces
// where it is wider than its element.
#pragma once
#include <QString>

class QCPLegend;
class QCPTextElement;

namespace remat::gui {

// Lays `legend`'s items out row by row in the most columns (at most `max_columns`) whose widest
// items, with the legend's spacing and margins, fit in `width` pixels; one column when none do.
void fit_legend_columns(QCPLegend* legend, double width, int max_columns);

// Sets `title`'s text to `text` with a line break at the last space before each point where a
// line would grow wider than `width` pixels less the element's margins.
void fit_title(QCPTextElement* title, const QString& text, double width);

}  // namespace remat::gui
