// The analysis page: the ledger of the current run; the bytes each block saved as measured next
// to the analytic formula (Korthikanti's closed form for GPT blocks, the exact table-derived
// breakdown otherwise) with its terms; and the simulator's predicted peak against the measured
// one for every run in the list.
#pragma once
#include <QWidget>
#include <memory>
#include <vector>

#include "run_entry.h"

class QLabel;
class QTableWidget;

namespace remat::gui {

class LedgerView;

class AnalysisView : public QWidget {
  Q_OBJECT
 public:
  explicit AnalysisView(QWidget* parent = nullptr);
  void setCurrent(const RunEntry& run);
  void setRuns(const std::vector<RunEntry>& runs);

  LedgerView* ledger() const { return ledger_; }
  QTableWidget* formulaTerms() const { return terms_; }
  QTableWidget* blockTable() const { return blocks_; }
  QTableWidget* termTable() const { return terms_; }
  QTableWidget* predictionTable() const { return predictions_; }

 private:
  LedgerView* ledger_;
  QLabel* formula_;
  QTableWidget* blocks_;
  QTableWidget* terms_;
  QTableWidget* predictions_;
};

}  // namespace remat::gui
