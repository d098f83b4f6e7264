#include "views/plot_fit.h"

#include <QFontMetricsF>
#include <QStringList>
#include <algorithm>
#include <qcustomplot.h>
#include <vector>

namespace remat::gui {

namespace {

// The width `legend` needs with its items filled row by row into `columns` columns.
double legend_width(const std::vector<int>& item_widths, const QCPLegend* legend, int columns) {
  std::vector<int> col(static_cast<std::size_t>(columns), 0);
  for (std::size_t i = 0; i < item_widths.size(); ++i) {
    int& c = col[i % static_cast<std::size_t>(columns)];
    c = std::max(c, item_widths[i]);
  }
  double w = legend->margins().left() + legend->margins().right() + (columns - 1) * legend->columnSpacing();
  for (int c : col) w += c;
  return w;
}

}  // namespace

void fit_legend_columns(QCPLegend* legend, double width, int max_columns) {
  std::vector<int> widths;
  for (int i = 0; i < legend->itemCount(); ++i)
    if (QCPAbstractLegendItem* it = legend->item(i)) widths.push_back(it->minimumOuterSizeHint().width());
  if (widths.empty()) return;
  int columns = std::min<int>(max_columns, static_cast<int>(widths.size()));
  while (columns > 1 && legend_width(widths, legend, columns) > width) --columns;
  columns = std::max(columns, 1);
  if (legend->wrap() == columns && legend->fillOrder() == QCPLayoutGrid::foColumnsFirst) return;
  legend->setWrap(columns);
  legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
}

void fit_title(QCPTextElement* title, const QString& text, double width) {
  const QFontMetricsF fm(title->font());
  const double room = width - title->margins().left() - title->margins().right();
  QStringList lines;
  QString line;
  for (const QString& word : text.split(' ', Qt::SkipEmptyParts)) {
    const QString longer = line.isEmpty() ? word : line + ' ' + word;
    if (!line.isEmpty() && fm.horizontalAdvance(longer) > room) {
      lines << line;
      line = word;
    } else {
      line = longer;
    }
  }
  if (!line.isEmpty()) lines << line;
  const QString fitted = lines.join('\n');
  if (fitted != title->text()) title->setText(fitted);
}

}  // namespace remat::gui
