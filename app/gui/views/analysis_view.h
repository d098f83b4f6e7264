// The analysis page: the ledger of the current run; the bytes each block saved as measured next
// to the analytic formula (Korthikanti's closed form for GPT blocks, the exact table-derived
// breakdown otherwise) with its terms; and the simulator's predicted peak against the measured
// one for every run in the list. A trace from PyTorch (imported, or recorded by python/rematlab)
// has no RematLab model to put in the formula: the page says what the trace holds instead, with
// the bytes each module held for backward when the recording wrote them.
#pragma once
#include <QWidget>
#include <memory>
#include <vector>

#include "run_entry.h"

class QLabel;
class QStackedWidget;
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
  // For a trace from PyTorch: what it holds, and its table (bytes per module of a recording,
  // else allocations per category).
  QLabel* traceContents() const { return contents_; }
  QTableWidget* holdingsTable() const { return holdings_; }
  bool showsFormula() const;

 private:
  void showFormula(const Trace& t);
  void showContents(const RunEntry& run);

  LedgerView* ledger_;
  QLabel* formula_;
  QLabel* contents_;
  QLabel* holdings_title_;
  QTableWidget* blocks_;
  QTableWidget* terms_;
  QTableWidget* predictions_;
  QTableWidget* holdings_;
  QStackedWidget* left_;   // the block table, or what the trace holds
  QStackedWidget* right_;  // the formula's terms, or the trace's table
};

}  // namespace remat::gui
