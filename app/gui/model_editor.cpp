#include "model_editor.h"

#include <algorithm>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QVBoxLayout>
#include <limits>

#include "core/util/error.h"

namespace remat::gui {

namespace {

const char* kIntFields[][3] = {
    {"layers", "Blocks (L)", "number of transformer blocks"},
    {"hidden", "Hidden (h)", "hidden size"},
    {"heads", "Heads (a)", "attention heads; must divide the hidden size"},
    {"kv_heads", "KV heads", "key/value heads (grouped-query attention, llama only); must divide heads"},
    {"ffn", "FFN width", "width of the MLP (4h for GPT-2)"},
    {"seq", "Sequence (s)", "tokens per sequence"},
    {"batch", "Micro-batch (b)", "sequences per step"},
    {"vocab", "Vocabulary", "vocabulary size (the corpus is byte-level: 256 is enough)"},
    {"positions", "Positions", "rows of the learned position table (gpt2); at least the sequence length"},
};

const QString kModifiedMark = QStringLiteral(" (modified)");

// The name a config had before its fields were edited (a model saved after editing keeps its mark
// in the name: it is not marked twice).
QString modified_base(const QString& name) {
  return name.endsWith(kModifiedMark) ? name.chopped(kModifiedMark.size()) : name;
}

QLabel* error_label(QWidget* parent) {
  auto* l = new QLabel(parent);
  l->setWordWrap(true);
  l->setStyleSheet("color: #d62728;");
  l->setVisible(false);
  return l;
}

}  // namespace

ModelEditor::ModelEditor(QWidget* parent)
    : QWidget(parent),
      general_error_(error_label(this)),
      arch_(new QComboBox(this)),
      attention_(new QComboBox(this)),
      dtype_(new QComboBox(this)),
      dropout_(new QDoubleSpinBox(this)),
      norm_eps_(new QLineEdit(this)),
      rope_theta_(new QLineEdit(this)) {
  auto* form = new QFormLayout;
  form->setContentsMargins(0, 0, 0, 0);
  form->setVerticalSpacing(3);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  l->addLayout(form);
  l->addWidget(general_error_);
  setLayout(l);

  for (const auto& f : family_names()) arch_->addItem(QString::fromStdString(f));
  attention_->addItem("naive");
  attention_->addItem("flash");
  dtype_->addItem("bf16");
  dtype_->addItem("fp32");
  addRow("architecture", tr("Architecture"), arch_, tr("The model family: its norms, MLP, positions, biases and Hugging Face names "
                                                    "(gpt2: LayerNorm, GELU, learned positions; llama and the others: RMSNorm, "
                                                    "gated MLP, RoPE, GQA)"));
  for (const auto& f : kIntFields) {
    auto* sb = new QSpinBox(this);
    sb->setRange(0, std::numeric_limits<int>::max());
    sb->setAccelerated(true);
    addRow(f[0], tr(f[1]), sb, tr(f[2]));
    connect(sb, &QSpinBox::valueChanged, this, &ModelEditor::onEdit);
  }
  dropout_->setRange(0.0, 0.99);
  dropout_->setSingleStep(0.05);
  dropout_->setDecimals(3);
  addRow("dropout", tr("Dropout"), dropout_, tr("dropout probability; masks are one byte per element"));
  addRow("attention", tr("Attention"), attention_, tr("naive keeps the b·a·s² probabilities; flash keeps only the log-sum-exp"));
  addRow("dtype", tr("Activations"), dtype_, tr("dtype of activations, parameters and their gradients"));
  addRow("norm_eps", tr("Norm ε"), norm_eps_, tr("epsilon of the norms"));
  addRow("rope_theta", tr("RoPE θ"), rope_theta_, tr("RoPE base (llama)"));
  // Each row: the editor with its error label under it.
  for (const QString& key : {QString("architecture"), QString("layers"), QString("hidden"), QString("heads"),
                             QString("kv_heads"), QString("ffn"), QString("seq"), QString("batch"), QString("vocab"),
                             QString("positions"), QString("dropout"), QString("attention"), QString("dtype"),
                             QString("norm_eps"), QString("rope_theta")}) {
    auto* box = new QWidget(this);
    auto* v = new QVBoxLayout(box);
    v->setContentsMargins(0, 0, 0, 0);
    v->setSpacing(1);
    v->addWidget(fields_[key]);
    v->addWidget(errors_[key]);
    form->addRow(fields_[key]->property("rowLabel").toString(), box);
  }
  connect(arch_, &QComboBox::currentIndexChanged, this, &ModelEditor::onEdit);
  connect(attention_, &QComboBox::currentIndexChanged, this, &ModelEditor::onEdit);
  connect(dtype_, &QComboBox::currentIndexChanged, this, &ModelEditor::onEdit);
  connect(dropout_, &QDoubleSpinBox::valueChanged, this, &ModelEditor::onEdit);
  connect(norm_eps_, &QLineEdit::textChanged, this, &ModelEditor::onEdit);
  connect(rope_theta_, &QLineEdit::textChanged, this, &ModelEditor::onEdit);
  setConfig(ModelConfig{});
}

void ModelEditor::addRow(const QString& key, const QString& label, QWidget* editor, const QString& tip) {
  editor->setToolTip(tip);
  editor->setProperty("rowLabel", label);
  editor->setObjectName(key);
  fields_[key] = editor;
  errors_[key] = error_label(this);
  errors_[key]->setObjectName(key + "_error");
}

QSpinBox* ModelEditor::intField(const QString& name) const { return qobject_cast<QSpinBox*>(fields_.value(name)); }

void ModelEditor::setConfig(const ModelConfig& m) {
  filling_ = true;
  name_ = QString::fromStdString(m.name);
  base_name_ = modified_base(name_);
  modified_ = false;
  base_ = m;
  arch_->setCurrentIndex(static_cast<int>(m.family));
  intField("layers")->setValue(m.layers);
  intField("hidden")->setValue(m.hidden);
  intField("heads")->setValue(m.heads);
  intField("kv_heads")->setValue(m.kv_heads);
  intField("ffn")->setValue(m.ffn);
  intField("seq")->setValue(m.seq);
  intField("batch")->setValue(m.batch);
  intField("vocab")->setValue(m.vocab);
  intField("positions")->setValue(m.positions);
  dropout_->setValue(m.dropout);
  attention_->setCurrentIndex(m.attention == AttentionImpl::Naive ? 0 : 1);
  dtype_->setCurrentIndex(m.dtype == DType::BF16 ? 0 : 1);
  norm_eps_->setText(QString::number(m.norm_eps, 'g', 10));
  rope_theta_->setText(QString::number(m.rope_theta, 'g', 10));
  filling_ = false;
  updateEnabled();
  validate();
  emit changed();
}

ModelConfig ModelEditor::config() const {
  // Features the editor does not show are kept from the config it was given.
  ModelConfig m = base_;
  const auto family = static_cast<Family>(std::max(0, arch_->currentIndex()));
  if (family != m.family) set_family(m, family);
  m.ignored_fields.clear();
  m.name = name_.toStdString();
  m.layers = intField("layers")->value();
  m.hidden = intField("hidden")->value();
  m.heads = intField("heads")->value();
  m.kv_heads = m.family == Family::Gpt2 ? m.heads : intField("kv_heads")->value();
  m.ffn = intField("ffn")->value();
  m.seq = intField("seq")->value();
  m.batch = intField("batch")->value();
  m.vocab = intField("vocab")->value();
  m.positions = intField("positions")->value();
  m.dropout = dropout_->value();
  m.attention = attention_->currentIndex() == 0 ? AttentionImpl::Naive : AttentionImpl::Flash;
  m.dtype = dtype_->currentIndex() == 0 ? DType::BF16 : DType::F32;
  bool ok = false;
  double eps = norm_eps_->text().trimmed().toDouble(&ok);
  m.norm_eps = ok ? eps : std::numeric_limits<double>::quiet_NaN();
  double theta = rope_theta_->text().trimmed().toDouble(&ok);
  m.rope_theta = ok ? theta : std::numeric_limits<double>::quiet_NaN();
  return m;
}

void ModelEditor::onEdit() {
  if (filling_) return;
  modified_ = true;
  name_ = base_name_.isEmpty() || base_name_ == "custom" ? QString("custom") : base_name_ + kModifiedMark;
  updateEnabled();
  validate();
  emit edited();
  emit changed();
}

void ModelEditor::updateEnabled() {
  const bool gpt2 = arch_->currentIndex() == 0;
  fields_["kv_heads"]->setEnabled(!gpt2);
  fields_["positions"]->setEnabled(gpt2);
  rope_theta_->setEnabled(!gpt2);
  if (gpt2 && !filling_) {
    filling_ = true;
    intField("kv_heads")->setValue(intField("heads")->value());
    filling_ = false;
  }
}

void ModelEditor::validate() {
  for (QLabel* l : errors_) {
    l->clear();
    l->setVisible(false);
  }
  general_error_->clear();
  general_error_->setVisible(false);
  error_.clear();
  error_field_.clear();
  try {
    config().validate();
  } catch (const ConfigError& e) {
    error_ = QString::fromStdString(e.what());
    error_field_ = QString::fromStdString(e.field());
  } catch (const std::exception& e) {
    error_ = QString::fromStdString(e.what());
  }
  if (error_.isEmpty()) return;
  QLabel* l = errors_.value(error_field_, general_error_);
  l->setText(error_);
  l->setVisible(true);
}

}  // namespace remat::gui
