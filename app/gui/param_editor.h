// Editors generated from a policy's declared parameters: a spin box with the declared range for
// Int and Float (with a "default" entry below the range when the parameter is optional), a check
// box for Bool, a list for String choices, a line for free strings, and for tensor-name lists a
// line with a menu of the model's saved tensors. values() gives what differs from the defaults.
#pragma once
#include <QMap>
#include <QWidget>
#include <map>
#include <string>
#include <vector>

#include "core/plugin/policy.h"

class QFormLayout;
class QLabel;

namespace remat::gui {

class ParamEditor : public QWidget {
  Q_OBJECT
 public:
  explicit ParamEditor(QWidget* parent = nullptr);
  void setParams(const std::vector<ParamDecl>& decls);
  // The tensors offered for Names parameters (the model's saved set).
  void setTensorNames(const std::vector<std::string>& names);
  std::map<std::string, std::string> values() const;
  // Sets a parameter as a user would type it; false when there is no such parameter or the
  // value is not accepted by its editor.
  bool setValue(const QString& name, const QString& value);
  QWidget* editor(const QString& name) const { return editors_.value(name); }
  int count() const { return static_cast<int>(decls_.size()); }

 signals:
  void changed();

 private:
  std::vector<ParamDecl> decls_;
  std::vector<std::string> tensors_;
  QMap<QString, QWidget*> editors_;
  QFormLayout* form_;
  QLabel* none_;
};

}  // namespace remat::gui
