#include "views/analysis_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include "core/analysis/block_formula.h"
#include "format.h"
#include "views/ledger_view.h"

namespace remat::gui {

namespace {

QTableWidget* make_table(QWidget* parent, const QStringList& headers) {
  auto* t = new QTableWidget(0, headers.size(), parent);
  t->setHorizontalHeaderLabels(headers);
  t->verticalHeader()->setVisible(false);
  t->verticalHeader()->setDefaultSectionSize(t->fontMetrics().height() + 6);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setAlternatingRowColors(true);
  t->horizontalHeader()->setStretchLastSection(true);
  return t;
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

QWidget* titled(const QString& title, QWidget* body, QWidget* extra, QWidget* parent) {
  auto* w = new QWidget(parent);
  auto* l = new QVBoxLayout(w);
  l->setContentsMargins(0, 4, 0, 0);
  l->addWidget(new QLabel("<b>" + title + "</b>", w));
  if (extra) l->addWidget(extra);
  l->addWidget(body, 1);
  return w;
}

}  // namespace

AnalysisView::AnalysisView(QWidget* parent)
    : QWidget(parent),
      ledger_(new LedgerView(this)),
      formula_(new QLabel(this)),
      blocks_(make_table(this, {tr("Block"), tr("Measured"), tr("On host"), tr("Formula"), tr("Measured − formula")})),
      terms_(make_table(this, {tr("Tensor"), tr("Formula"), tr("Bytes")})),
      predictions_(make_table(this, {tr("Run"), tr("Predicted"), tr("Measured"), tr("Difference")})) {
  // The formula column takes what is left (its full text in the tooltip); the others fit their
  // contents, so no byte count is cut.
  terms_->horizontalHeader()->setStretchLastSection(false);
  terms_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  terms_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
  terms_->horizontalHeader()->setSectionResizeMode(2, QHeaderView::ResizeToContents);
  terms_->setTextElideMode(Qt::ElideMiddle);
  formula_->setWordWrap(true);
  formula_->setTextFormat(Qt::RichText);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(ledger_);
  auto* bottom = new QSplitter(Qt::Horizontal, split);
  auto* blockside = new QSplitter(Qt::Horizontal, bottom);
  blockside->addWidget(titled(tr("Saved bytes per block"), blocks_, formula_, blockside));
  blockside->addWidget(titled(tr("The formula, term by term"), terms_, nullptr, blockside));
  bottom->addWidget(blockside);
  bottom->addWidget(titled(tr("Predicted vs measured peak"), predictions_, nullptr, bottom));
  bottom->setSizes({700, 420});
  blockside->setSizes({380, 320});
  split->addWidget(bottom);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(6, 6, 6, 6);
  l->addWidget(split);
}

void AnalysisView::setCurrent(const RunEntry& run) {
  ledger_->setTrace(run.trace);
  blocks_->setRowCount(0);
  terms_->setRowCount(0);
  formula_->clear();
  if (!run.trace) return;
  const Trace& t = *run.trace;
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
  QFont bold = terms_->font();
  bold.setBold(true);
  for (int c = 0; c < 3; ++c) terms_->item(last, c)->setFont(bold);
  blocks_->resizeColumnsToContents();
  terms_->resizeColumnsToContents();
}

void AnalysisView::setRuns(const std::vector<RunEntry>& runs) {
  predictions_->setRowCount(static_cast<int>(runs.size()));
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Trace& t = *runs[i].trace;
    const int r = static_cast<int>(i);
    predictions_->setItem(r, 0, cell(runs[i].label + " (" + QString::fromStdString(t.device) + ")"));
    predictions_->setItem(r, 1, cell(bytes_cell(t.predicted_peak_bytes), true, QString("%1 bytes").arg(t.predicted_peak_bytes)));
    predictions_->setItem(r, 2, cell(t.complete || t.peak_bytes ? bytes_cell(t.peak_bytes) : QString("—"), true,
                                     QString("%1 bytes").arg(t.peak_bytes)));
    const std::int64_t d = static_cast<std::int64_t>(t.peak_bytes) - static_cast<std::int64_t>(t.predicted_peak_bytes);
    QString diff = !t.complete ? QString::fromStdString(t.status) : d == 0 ? tr("exact") : signed_bytes(d);
    predictions_->setItem(r, 3, cell(diff, true, QString("%1 bytes").arg(d)));
  }
  predictions_->resizeColumnsToContents();
}

}  // namespace remat::gui
