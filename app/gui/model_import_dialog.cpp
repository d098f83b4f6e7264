#include "model_import_dialog.h"

#include <QDialogButtonBox>
#include <algorithm>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QLocale>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

namespace remat::gui {

ModelImportDialog::ModelImportDialog(const ModelImport& imported, QWidget* parent)
    : QDialog(parent), imported_(imported), headline_(new QLabel(this)) {
  const QString file = QFileInfo(imported_.path).fileName();
  setWindowTitle(tr("Open model: %1").arg(file));
  headline_->setWordWrap(true);
  headline_->setTextFormat(Qt::RichText);
  auto* l = new QVBoxLayout(this);
  l->addWidget(headline_);
  auto* buttons = new QDialogButtonBox(this);
  if (imported_.ok) {
    headline_->setText(tr("<b>%1</b> was imported from %2. Nothing runs until you press Run.")
                           .arg(QString::fromStdString(imported_.config.name).toHtmlEscaped(),
                                imported_.path.toHtmlEscaped()));
    l->addWidget(buildSummary(), 1);
    use_ = buttons->addButton(tr("Use this model"), QDialogButtonBox::AcceptRole);
    use_->setDefault(true);
    buttons->addButton(QDialogButtonBox::Cancel);
  } else {
    const auto n = imported_.problems.size();
    headline_->setText(tr("<b>%1</b> cannot be used: %2. The model was not changed.")
                           .arg(imported_.path.toHtmlEscaped(),
                                n == 1 ? tr("1 problem") : tr("%1 problems").arg(n)));
    l->addWidget(buildProblems(), 1);
    buttons->addButton(QDialogButtonBox::Close);
  }
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  l->addWidget(buttons);
}

QLabel* ModelImportDialog::value(const QString& key) const {
  for (const auto& [k, label] : values_)
    if (k == key) return label;
  return nullptr;
}

QWidget* ModelImportDialog::buildSummary() {
  const ModelConfig& m = imported_.config;
  auto* w = new QWidget(this);
  auto* l = new QVBoxLayout(w);
  l->setContentsMargins(0, 0, 0, 0);
  auto* box = new QGroupBox(tr("Imported"), w);
  auto* form = new QFormLayout(box);
  const QLocale loc;
  const std::int64_t params = parameter_count(m);
  auto row = [&](const QString& key, const QString& label, const QString& text) {
    auto* v = new QLabel(text, box);
    v->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(label, v);
    values_.push_back({key, v});
  };
  row("family", tr("Family"), model_family(m));
  row("layers", tr("Layers"), QString::number(m.layers));
  row("hidden", tr("Hidden"), QString::number(m.hidden));
  row("heads", tr("Heads / kv-heads"), tr("%1 / %2").arg(m.heads).arg(m.kv_heads));
  row("head_dim", tr("Head dim"), QString::number(m.head_dim()));
  if (m.mla.on())
    row("mla", tr("Latent attention"), QString::fromStdString(describe_mla(m.mla, m.heads)));
  if (m.moe.on()) row("experts", tr("Experts"), QString::fromStdString(describe_moe(m.moe, m.tokens())));
  row("ffn", tr("FFN"), QString::number(m.ffn));
  row("vocab", tr("Vocabulary"), QString::number(m.vocab));
  row("positions", tr("Positions"), QString::number(m.positions));
  row("parameters", tr("Parameters"),
      tr("%1 (%2)").arg(human_count(static_cast<double>(params)), loc.toString(static_cast<qlonglong>(params))));
  row("run", tr("Run shape"), tr("seq %1 × batch %2 (change them under Fields)").arg(m.seq).arg(m.batch));
  l->addWidget(box);

  auto* ig = new QGroupBox(tr("Ignored fields (%1)").arg(m.ignored_fields.size()), w);
  auto* il = new QVBoxLayout(ig);
  auto* note = new QLabel(m.ignored_fields.empty()
                              ? tr("None: every field of the file is modelled.")
                              : tr("Accepted and left out: packaging, tokenizer and inference settings "
                                   "that do not change a training step."),
                          ig);
  note->setWordWrap(true);
  il->addWidget(note);
  ignored_ = new QListWidget(ig);
  for (const auto& f : m.ignored_fields) ignored_->addItem(QString::fromStdString(f));
  ignored_->setVisible(!m.ignored_fields.empty());
  ignored_->setSelectionMode(QAbstractItemView::NoSelection);
  ignored_->setFocusPolicy(Qt::NoFocus);
  const int shown = std::clamp(ignored_->count(), 1, 8);
  ignored_->setFixedHeight(ignored_->sizeHintForRow(0) * shown + 2 * ignored_->frameWidth() + 2);
  il->addWidget(ignored_);
  l->addWidget(ig, 1);
  setMinimumWidth(520);
  return w;
}

QWidget* ModelImportDialog::buildProblems() {
  table_ = new QTableWidget(static_cast<int>(imported_.problems.size()), 3, this);
  table_->setHorizontalHeaderLabels({tr("Field"), tr("Problem"), tr("What to do")});
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setWordWrap(true);
  table_->setTextElideMode(Qt::ElideNone);
  for (int r = 0; r < table_->rowCount(); ++r) {
    const ImportProblem& p = imported_.problems[r];
    const QString cells[3] = {p.field.isEmpty() ? tr("(file)") : p.field, p.message, p.remedy};
    for (int c = 0; c < 3; ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setToolTip(cells[c]);
      item->setTextAlignment(Qt::AlignLeft | Qt::AlignTop);
      table_->setItem(r, c, item);
    }
  }
  QHeaderView* h = table_->horizontalHeader();
  h->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  h->setSectionResizeMode(1, QHeaderView::Stretch);
  h->setSectionResizeMode(2, QHeaderView::Stretch);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setCurrentCell(-1, -1);
  setMinimumWidth(900);
  resize(960, std::clamp(130 + 44 * table_->rowCount(), 240, 720));
  return table_;
}

}  // namespace remat::gui
