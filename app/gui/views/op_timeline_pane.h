// The op timeline with what goes around it: a search bar over it (Ctrl+F; Enter / Shift+Enter
// for the next / previous match, "k of n"), and a side panel (sidePanel(), placed by the owner)
// with the details of the clicked slice, the table of the Shift+dragged time range, and the
// statistics of the whole step.
#pragma once
#include <QWidget>
#include <memory>

#include "core/trace/trace.h"

class QLabel;
class QLineEdit;
class QTabWidget;
class QToolButton;

namespace remat::gui {

class OpStatsTable;
struct RunViewData;
class OpTimelineView;

class OpTimelinePane : public QWidget {
  Q_OBJECT
 public:
  explicit OpTimelinePane(QWidget* parent = nullptr);
  void setTrace(std::shared_ptr<const Trace> t, std::int64_t origin, std::int64_t duration);
  // ... with the data the run view built before (run_view_data.h).
  void setData(const RunViewData& d, std::int64_t origin, std::int64_t duration);

  OpTimelineView* view() const { return view_; }
  QLineEdit* searchBox() const { return search_; }
  QLabel* matchLabel() const { return match_; }
  QLabel* details() const { return details_; }
  OpStatsTable* rangeTable() const { return range_; }
  OpStatsTable* statsTable() const { return stats_; }
  QTabWidget* tabs() const { return tabs_; }
  QWidget* sidePanel() const;

 protected:
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void shown();  // after the view and the statistics are set
  void showMatch(int current, int count);
  void showRange(qint64 t0, qint64 t1);

  std::shared_ptr<const Trace> trace_;
  OpTimelineView* view_;
  QLineEdit* search_;
  QToolButton *prev_, *next_;
  QLabel* match_;
  QTabWidget* tabs_;
  QLabel* details_;
  OpStatsTable* range_;
  OpStatsTable* stats_;
};

}  // namespace remat::gui
