#include "views/analysis_view.h"

#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QScrollBar>
#include <QSplitter>
#include <QStackedWidget>
#include <QTableWidget>
#include <QVBoxLayout>
#include <array>
#include <numeric>

#include "core/analysis/block_formula.h"
#include "core/analysis/recorded_modules.h"
#include "core/util/error.h"
#include "format.h"
#include "views/ledger_view.h"

namespace remat::gui {

namespace {

// A table whose columns fit their contents and headers; `stretch` (-1: none) takes what is left
// and elides its text (the full text is in its tooltip). The table scrolls sideways only when the
// fitted columns are wider than it.
QTableWidget* make_table(QWidget* parent, const QStringList& headers, int stretch = -1) {
  auto* t = new QTableWidget(0, headers.size(), parent);
  t->setHorizontalHeaderLabels(headers);
  t->verticalHeader()->setVisible(false);
  t->verticalHeader()->setDefaultSectionSize(t->fontMetrics().height() + 6);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setAlternatingRowColors(true);
  t->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  t->setHorizontalScrollMode(QAbstractItemView::ScrollPerPixel);
  QHeaderView* h = t->horizontalHeader();
  h->setStretchLastSection(false);
  h->setSectionResizeMode(QHeaderView::ResizeToContents);
  if (stretch >= 0 && stretch < headers.size()) {
    h->setSectionResizeMode(stretch, QHeaderView::Stretch);
    t->setTextElideMode(Qt::ElideMiddle);
  }
  return t;
}

// The columns of a table that shows one of several kinds of rows; the first column stretches.
void set_columns(QTableWidget* t, const QStringList& headers) {
  t->setColumnCount(static_cast<int>(headers.size()));
  t->setHorizontalHeaderLabels(headers);
  t->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  t->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  t->setTextElideMode(Qt::ElideMiddle);
}

QTableWidgetItem* cell(const QString& text, bool right = false, const QString& tip = {}) {
  auto* it = new QTableWidgetItem(text);
  if (right) it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  if (!tip.isEmpty()) it->setToolTip(tip);
  return it;
}

QString bytes_cell(std::uint64_t b) { return human_bytes(static_cast<double>(b)); }

QString signed_bytes(std::int64_t d) {
  if (d == 0) return "0";
  return (d > 0 ? "+" : "−") + human_bytes(static_cast<double>(d > 0 ? d : -d));
}

void bold_row(QTableWidget* t, int r) {
  QFont bold = t->font();
  bold.setBold(true);
  for (int c = 0; c < t->columnCount(); ++c)
    if (t->item(r, c)) t->item(r, c)->setFont(bold);
}

QWidget* titled(QWidget* title, QWidget* body, QWidget* extra, QWidget* parent) {
  auto* w = new QWidget(parent);
  auto* l = new QVBoxLayout(w);
  l->setContentsMargins(0, 4, 0, 0);
  l->addWidget(title);
  if (extra) l->addWidget(extra);
  l->addWidget(body, 1);
  return w;
}

QLabel* heading(const QString& title, QWidget* parent) { return new QLabel("<b>" + title + "</b>", parent); }

std::string provenance(const Trace& t, const char* key) {
  for (const auto& [k, v] : t.provenance)
    if (k == key) return v;
  return {};
}

}  // namespace

AnalysisView::AnalysisView(QWidget* parent)
    : QWidget(parent),
      ledger_(new LedgerView(this)),
      formula_(new QLabel(this)),
      contents_(new QLabel(this)),
      holdings_title_(heading({}, this)),
      blocks_(make_table(this, {tr("Block"), tr("Measured"), tr("On host"), tr("Formula"), tr("Measured − formula")})),
      terms_(make_table(this, {tr("Tensor"), tr("Formula"), tr("Bytes")}, 1)),
      predictions_(make_table(this, {tr("Run"), tr("Predicted"), tr("Measured"), tr("Difference")}, 0)),
      holdings_(make_table(this, {}, 0)),
      left_(new QStackedWidget(this)),
      right_(new QStackedWidget(this)) {
  for (QLabel* l : {formula_, contents_}) {
    l->setWordWrap(true);
    l->setTextFormat(Qt::RichText);
  }
  contents_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  // Left: the block table (or what an imported trace holds) over the predictions; right: the
  // formula's terms (or the trace's table). Every column fits at 1280×800.
  left_->addWidget(titled(heading(tr("Saved bytes per block"), this), blocks_, formula_, left_));
  left_->addWidget(titled(heading(tr("What the trace holds"), this), contents_, nullptr, left_));
  right_->addWidget(titled(heading(tr("The formula, term by term"), this), terms_, nullptr, right_));
  right_->addWidget(titled(holdings_title_, holdings_, nullptr, right_));
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(ledger_);
  auto* bottom = new QSplitter(Qt::Horizontal, split);
  auto* leftside = new QSplitter(Qt::Vertical, bottom);
  leftside->addWidget(left_);
  leftside->addWidget(titled(heading(tr("Predicted vs measured peak"), this), predictions_, nullptr, leftside));
  leftside->setSizes({300, 200});
  bottom->addWidget(leftside);
  bottom->addWidget(right_);
  bottom->setSizes({520, 400});
  split->addWidget(bottom);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(6, 6, 6, 6);
  l->addWidget(split);
}

bool AnalysisView::showsFormula() const { return left_->currentIndex() == 0; }

void AnalysisView::setCurrent(const RunEntry& run) {
  ledger_->setTrace(run.trace);
  blocks_->setRowCount(0);
  terms_->setRowCount(0);
  holdings_->setRowCount(0);
  formula_->clear();
  contents_->clear();
  left_->setCurrentIndex(0);
  right_->setCurrentIndex(0);
  if (!run.trace) return;
  if (run.trace->source == kOwnSource)
    showFormula(*run.trace);
  else
    showContents(run);
}

void AnalysisView::showFormula(const Trace& t) {
  const BlockFormula f = block_formula(t.model);
  const std::uint64_t expect = f.closed_form ? f.closed_form_bytes : f.total;
  QString head;
  if (f.closed_form)
    head = tr("Store-everything formula: <b>%1</b> = %2 bytes (%3) per block — %4.")
               .arg(QString::fromStdString(f.closed_form_text), QString::number(f.closed_form_bytes),
                    bytes_cell(f.closed_form_bytes), QString::fromStdString(f.source));
  else
    head = tr("Store-everything: <b>%1 bytes</b> (%2) per block — %3.")
               .arg(f.total)
               .arg(bytes_cell(f.total), QString::fromStdString(f.source));
  if (t.policy != "none") head += tr(" Under <i>%1</i> a block keeps less; the difference is what the policy drops.").arg(QString::fromStdString(t.policy));
  formula_->setText(head);
  const std::size_t L = t.saved_bytes_per_block.size();
  blocks_->setRowCount(static_cast<int>(L));
  for (std::size_t b = 0; b < L; ++b) {
    const int r = static_cast<int>(b);
    const std::uint64_t m = t.saved_bytes_per_block[b];
    const std::uint64_t h = b < t.host_bytes_per_block.size() ? t.host_bytes_per_block[b] : 0;
    blocks_->setItem(r, 0, cell(QString::number(b), true));
    blocks_->setItem(r, 1, cell(bytes_cell(m), true, QString("%1 bytes").arg(m)));
    blocks_->setItem(r, 2, cell(h ? bytes_cell(h) : QString("—"), true, QString("%1 bytes").arg(h)));
    blocks_->setItem(r, 3, cell(bytes_cell(expect), true, QString("%1 bytes").arg(expect)));
    const std::int64_t d = static_cast<std::int64_t>(m) - static_cast<std::int64_t>(expect);
    blocks_->setItem(r, 4, cell(signed_bytes(d), true, QString("%1 bytes").arg(d)));
  }
  terms_->setRowCount(static_cast<int>(f.terms.size()) + 1);
  for (std::size_t i = 0; i < f.terms.size(); ++i) {
    const int r = static_cast<int>(i);
    terms_->setItem(r, 0, cell(QString::fromStdString(f.terms[i].tensor)));
    terms_->setItem(r, 1, cell(QString::fromStdString(f.terms[i].formula), false, QString::fromStdString(f.terms[i].formula)));
    terms_->setItem(r, 2, cell(QString::number(f.terms[i].bytes), true, bytes_cell(f.terms[i].bytes)));
  }
  const int last = static_cast<int>(f.terms.size());
  terms_->setItem(last, 0, cell(tr("total")));
  const QString closed = f.closed_form ? QString::fromStdString(f.closed_form_text) : QString();
  terms_->setItem(last, 1, cell(closed, false, closed));
  terms_->setItem(last, 2, cell(QString::number(f.total), true, bytes_cell(f.total)));
  bold_row(terms_, last);
}

void AnalysisView::showContents(const RunEntry& run) {
  const Trace& t = *run.trace;
  left_->setCurrentIndex(1);
  right_->setCurrentIndex(1);
  // What the events hold, per category.
  std::array<std::uint64_t, kNumCategories> allocs{}, bytes{};
  std::uint64_t frees = 0;
  for (const MemoryEvent& e : t.events) {
    const auto c = static_cast<std::size_t>(e.category);
    if (e.delta > 0) {
      ++allocs[c];
      bytes[c] += static_cast<std::uint64_t>(e.delta);
    } else if (e.delta < 0) {
      ++frees;
    }
  }
  QStringList seen;
  for (int c = 0; c < kNumCategories; ++c)
    if (allocs[static_cast<std::size_t>(c)]) seen << category_name(static_cast<Category>(c));
  const bool recorded = t.source == kRecordedSource;
  QString torch = QString::fromStdString(provenance(t, "torch"));
  if (torch.isEmpty() && !provenance(t, "snapshot_layout").empty())
    torch = tr("%1 (from the snapshot's layout)").arg(QString::fromStdString(provenance(t, "snapshot_layout")));
  QString from = QString::fromStdString(provenance(t, "imported_from"));
  if (from.isEmpty() && !run.dir.isEmpty()) from = QFileInfo(run.dir).fileName();
  QString text = tr("Source: <b>%1</b> (%2)").arg(QString::fromStdString(t.source),
                                                   recorded ? tr("a training step recorded in PyTorch by python/rematlab")
                                                   : t.source == "pytorch-snapshot" ? tr("a torch.cuda memory snapshot")
                                                                                    : tr("a torch.profiler trace"));
  if (!from.isEmpty()) text += tr(", from <i>%1</i>").arg(from.toHtmlEscaped());
  text += "<br>" + tr("PyTorch: %1").arg(torch.isEmpty() ? tr("version unknown") : torch.toHtmlEscaped());
  text += "<br>" + tr("Memory events: %L1 (%L2 allocations, %L3 frees) · ops: %L4 · ledger rows: %L5")
                       .arg(t.events.size())
                       .arg(std::accumulate(allocs.begin(), allocs.end(), std::uint64_t{0}))
                       .arg(frees)
                       .arg(t.ops.size())
                       .arg(t.ledger.size());
  text += "<br>" + tr("Categories seen: %1").arg(seen.isEmpty() ? tr("none") : seen.join(", "));
  text += "<br><br>" + tr("The store-everything formula needs a RematLab model (a preset or a model file run in "
                          "RematLab); %1, so no formula is shown.")
                           .arg(recorded ? tr("a recording's model fields are guessed from its modules")
                                         : tr("an imported trace has no model of its blocks"));
  // A recording's own table: the bytes each module held for backward (saved_tensors.csv).
  const QString saved = run.dir.isEmpty() ? QString() : run.dir + "/saved_tensors.csv";
  if (recorded && !saved.isEmpty() && QFileInfo::exists(saved)) {
    try {
      const RecordedRun rec = read_recorded_run(run.dir.toStdString());
      const auto rows = saved_bytes_per_module(rec);
      holdings_title_->setText("<b>" + tr("Held for backward, per module") + "</b>");
      set_columns(holdings_, {tr("Module"), tr("Block"), tr("Tensors"), tr("Bytes")});
      holdings_->setRowCount(static_cast<int>(rows.size()) + 1);
      std::uint64_t n = 0, sum = 0;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const int r = static_cast<int>(i);
        const QString m = QString::fromStdString(rows[i].module.empty() ? "(model)" : rows[i].module);
        holdings_->setItem(r, 0, cell(m, false, m));
        holdings_->setItem(r, 1, cell(rows[i].block >= 0 ? QString::number(rows[i].block) : QString("—"), true));
        holdings_->setItem(r, 2, cell(QString::number(rows[i].tensors), true));
        holdings_->setItem(r, 3, cell(bytes_cell(rows[i].bytes), true, QString("%1 bytes").arg(rows[i].bytes)));
        n += rows[i].tensors;
        sum += rows[i].bytes;
      }
      const int last = static_cast<int>(rows.size());
      holdings_->setItem(last, 0, cell(tr("total")));
      holdings_->setItem(last, 1, cell({}));
      holdings_->setItem(last, 2, cell(QString::number(n), true));
      holdings_->setItem(last, 3, cell(bytes_cell(sum), true, QString("%1 bytes").arg(sum)));
      bold_row(holdings_, last);
      text += "<br>" + tr("The recording held %1 for backward (saved_tensors.csv).").arg(bytes_cell(sum));
      contents_->setText(text);
      return;
    } catch (const Error& e) {
      text += "<br>" + tr("The recording could not be read: %1").arg(QString::fromStdString(e.what()).toHtmlEscaped());
    }
  }
  holdings_title_->setText("<b>" + tr("Allocations per category") + "</b>");
  set_columns(holdings_, {tr("Category"), tr("Allocations"), tr("Bytes allocated")});
  holdings_->setRowCount(static_cast<int>(seen.size()));
  int r = 0;
  for (int c = 0; c < kNumCategories; ++c) {
    const auto k = static_cast<std::size_t>(c);
    if (!allocs[k]) continue;
    holdings_->setItem(r, 0, cell(category_name(static_cast<Category>(c))));
    holdings_->setItem(r, 1, cell(QString("%L1").arg(allocs[k]), true));
    holdings_->setItem(r, 2, cell(bytes_cell(bytes[k]), true, QString("%1 bytes").arg(bytes[k])));
    ++r;
  }
  contents_->setText(text);
}

void AnalysisView::setRuns(const std::vector<RunEntry>& runs) {
  predictions_->setRowCount(static_cast<int>(runs.size()));
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Trace& t = *runs[i].trace;
    const int r = static_cast<int>(i);
    const QString name = runs[i].label + " (" + QString::fromStdString(t.device) + ")";
    predictions_->setItem(r, 0, cell(name, false, name));
    const bool predicted = t.source == kOwnSource;  // PyTorch's traces were never simulated
    predictions_->setItem(r, 1, predicted ? cell(bytes_cell(t.predicted_peak_bytes), true,
                                                 QString("%1 bytes").arg(t.predicted_peak_bytes))
                                          : cell("—", true, tr("no prediction: %1 trace").arg(QString::fromStdString(t.source))));
    predictions_->setItem(r, 2, cell(t.complete || t.peak_bytes ? bytes_cell(t.peak_bytes) : QString("—"), true,
                                     QString("%1 bytes").arg(t.peak_bytes)));
    const std::int64_t d = static_cast<std::int64_t>(t.peak_bytes) - static_cast<std::int64_t>(t.predicted_peak_bytes);
    QString diff = !t.complete ? QString::fromStdString(t.status) : !predicted ? QString("—")
                   : d == 0 ? tr("exact") : signed_bytes(d);
    predictions_->setItem(r, 3, cell(diff, true, QString("%1 bytes").arg(d)));
  }
}

}  // namespace remat::gui
