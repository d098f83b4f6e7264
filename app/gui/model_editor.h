// The model's fields (architecture, sizes, attention, dtype, ...) with the batch mode's
// validation (ModelConfig::validate): the first bad field shows its error right under it, and
// the editor says whether the configuration can be run.
#pragma once
#include <QMap>
#include <QWidget>

#include "core/model/model_config.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace remat::gui {

class ModelEditor : public QWidget {
  Q_OBJECT
 public:
  explicit ModelEditor(QWidget* parent = nullptr);

  void setConfig(const ModelConfig& m);  // fills the fields; emits changed(), not edited()
  // What the fields say; once edited it is named "<the name it was given> (modified)", or
  // "custom" when it had no name.
  ModelConfig config() const;
  bool modified() const { return modified_; }
  bool isValid() const { return error_.isEmpty(); }
  QString error() const { return error_; }
  QString errorField() const { return error_field_; }
  // The error label under a field ("" when the field has no error) and the field's editor.
  QLabel* errorLabel(const QString& field) const { return errors_.value(field); }
  QWidget* field(const QString& name) const { return fields_.value(name); }
  QSpinBox* intField(const QString& name) const;

 signals:
  void edited();   // the user changed a field
  void changed();  // the configuration changed (by the user or setConfig)

 private:
  void addRow(const QString& key, const QString& label, QWidget* editor, const QString& tip);
  void onEdit();
  void validate();
  void updateEnabled();

  QMap<QString, QWidget*> fields_;
  QMap<QString, QLabel*> errors_;
  QLabel* general_error_;
  QComboBox* arch_;
  ModelConfig base_;  // the config last set: features the editor does not show
  QComboBox* attention_;
  QComboBox* dtype_;
  QDoubleSpinBox* dropout_;
  QLineEdit* norm_eps_;
  QLineEdit* rope_theta_;
  QString name_ = "custom", base_name_;
  bool modified_ = false;
  QString error_, error_field_;
  bool filling_ = false;
};

}  // namespace remat::gui
