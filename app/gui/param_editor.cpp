#include "param_editor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QSpinBox>
#include <QToolButton>
#include <cmath>
#include <limits>

namespace remat::gui {

namespace {

constexpr double kIntMax = std::numeric_limits<int>::max() - 1;

bool optional_param(const ParamDecl& d) { return d.default_value.empty(); }

QStringList split_names(const QString& s) { return s.split('+', Qt::SkipEmptyParts); }

}  // namespace

ParamEditor::ParamEditor(QWidget* parent) : QWidget(parent), form_(new QFormLayout), none_(new QLabel(this)) {
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  form_->setContentsMargins(0, 0, 0, 0);
  form_->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  l->addLayout(form_);
  l->addWidget(none_);
  none_->setText(tr("<i>This policy has no parameters.</i>"));
}

void ParamEditor::setTensorNames(const std::vector<std::string>& names) { tensors_ = names; }

void ParamEditor::setParams(const std::vector<ParamDecl>& decls) {
  while (form_->rowCount() > 0) form_->removeRow(0);
  editors_.clear();
  decls_ = decls;
  none_->setVisible(decls_.empty());
  for (const ParamDecl& d : decls_) {
    const QString name = QString::fromStdString(d.name);
    const QString def = QString::fromStdString(d.default_value);
    QWidget* w = nullptr;
    switch (d.type) {
      case ParamType::Int: {
        auto* sb = new QSpinBox;
        double lo = d.min < d.max ? d.min : -kIntMax, hi = d.min < d.max ? d.max : kIntMax;
        lo = std::max(lo, -kIntMax);
        hi = std::min(hi, kIntMax);
        const bool opt = optional_param(d);
        sb->setRange(static_cast<int>(opt ? lo - 1 : lo), static_cast<int>(hi));
        if (opt) sb->setSpecialValueText(tr("default"));
        sb->setValue(opt ? sb->minimum() : def.toInt());
        connect(sb, &QSpinBox::valueChanged, this, &ParamEditor::changed);
        w = sb;
        break;
      }
      case ParamType::Float: {
        auto* sb = new QDoubleSpinBox;
        sb->setDecimals(4);
        double lo = d.min < d.max ? d.min : -1e12, hi = d.min < d.max ? d.max : 1e12;
        const bool opt = optional_param(d);
        const double step = std::max((hi - lo) / 100.0, 1e-4);
        sb->setSingleStep(d.min < d.max ? step : 0.1);
        sb->setRange(opt ? lo - sb->singleStep() : lo, hi);
        if (opt) sb->setSpecialValueText(tr("default"));
        sb->setValue(opt ? sb->minimum() : def.toDouble());
        connect(sb, &QDoubleSpinBox::valueChanged, this, &ParamEditor::changed);
        w = sb;
        break;
      }
      case ParamType::Bool: {
        auto* cb = new QCheckBox;
        cb->setChecked(def == "true" || def == "1" || def == "yes");
        connect(cb, &QCheckBox::toggled, this, &ParamEditor::changed);
        w = cb;
        break;
      }
      case ParamType::String:
        if (!d.choices.empty()) {
          auto* cb = new QComboBox;
          for (const auto& c : d.choices) cb->addItem(QString::fromStdString(c));
          const int i = cb->findText(def);
          cb->setCurrentIndex(i >= 0 ? i : 0);
          connect(cb, &QComboBox::currentIndexChanged, this, &ParamEditor::changed);
          w = cb;
          break;
        }
        [[fallthrough]];
      case ParamType::Names: {
        auto* box = new QWidget;
        auto* h = new QHBoxLayout(box);
        h->setContentsMargins(0, 0, 0, 0);
        auto* le = new QLineEdit(box);
        le->setObjectName("value");
        le->setText(def);
        le->setPlaceholderText(tr("default"));
        h->addWidget(le, 1);
        connect(le, &QLineEdit::textChanged, this, &ParamEditor::changed);
        if (d.type == ParamType::Names) {
          auto* pick = new QToolButton(box);
          pick->setText(tr("Tensors"));
          pick->setPopupMode(QToolButton::InstantPopup);
          auto* menu = new QMenu(pick);
          pick->setMenu(menu);
          connect(menu, &QMenu::aboutToShow, this, [this, menu, le] {
            menu->clear();
            const QStringList chosen = split_names(le->text());
            for (const auto& t : tensors_) {
              QAction* a = menu->addAction(QString::fromStdString(t));
              a->setCheckable(true);
              a->setChecked(chosen.contains(QString::fromStdString(t)));
              connect(a, &QAction::toggled, le, [le, a](bool on) {
                QStringList names = split_names(le->text());
                names.removeAll(a->text());
                if (on) names << a->text();
                le->setText(names.join('+'));
              });
            }
          });
          h->addWidget(pick);
        }
        w = box;
        break;
      }
    }
    w->setObjectName(name);
    w->setToolTip(QString::fromStdString(d.help));
    auto* label = new QLabel(name);
    label->setToolTip(QString::fromStdString(d.help));
    form_->addRow(label, w);
    editors_[name] = w;
  }
}

std::map<std::string, std::string> ParamEditor::values() const {
  std::map<std::string, std::string> out;
  for (const ParamDecl& d : decls_) {
    QWidget* w = editors_.value(QString::fromStdString(d.name));
    if (!w) continue;
    QString v;
    if (auto* sb = qobject_cast<QSpinBox*>(w)) {
      if (optional_param(d) && sb->value() == sb->minimum()) continue;
      v = QString::number(sb->value());
    } else if (auto* ds = qobject_cast<QDoubleSpinBox*>(w)) {
      if (optional_param(d) && ds->value() == ds->minimum()) continue;
      v = QString::number(ds->value(), 'g', 10);
    } else if (auto* cb = qobject_cast<QCheckBox*>(w)) {
      v = cb->isChecked() ? "true" : "false";
    } else if (auto* co = qobject_cast<QComboBox*>(w)) {
      v = co->currentText();
    } else if (auto* le = w->findChild<QLineEdit*>("value")) {
      v = le->text().trimmed();
      if (v.isEmpty()) continue;
    }
    if (v.toStdString() == d.default_value) continue;
    out[d.name] = v.toStdString();
  }
  return out;
}

bool ParamEditor::setValue(const QString& name, const QString& value) {
  QWidget* w = editors_.value(name);
  if (!w) return false;
  bool ok = true;
  if (auto* sb = qobject_cast<QSpinBox*>(w)) {
    const int v = value.toInt(&ok);
    if (!ok || v < sb->minimum() || v > sb->maximum()) return false;
    sb->setValue(v);
  } else if (auto* ds = qobject_cast<QDoubleSpinBox*>(w)) {
    const double v = value.toDouble(&ok);
    if (!ok || v < ds->minimum() || v > ds->maximum()) return false;
    ds->setValue(v);
  } else if (auto* cb = qobject_cast<QCheckBox*>(w)) {
    cb->setChecked(value == "true" || value == "1" || value == "yes");
  } else if (auto* co = qobject_cast<QComboBox*>(w)) {
    const int i = co->findText(value);
    if (i < 0) return false;
    co->setCurrentIndex(i);
  } else if (auto* le = w->findChild<QLineEdit*>("value")) {
    le->setText(value);
  }
  return true;
}

}  // namespace remat::gui
