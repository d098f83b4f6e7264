// Shown when a model file is opened, before anything runs: what was imported (family, sizes,
// parameter count) and the fields ignored, with "Use this model"; or, when the file is refused,
// every problem on its own row (field | problem | what to do) and Close.
#pragma once
#include <QDialog>

#include "model_info.h"

class QLabel;
class QListWidget;
class QPushButton;
class QTableWidget;

namespace remat::gui {

class ModelImportDialog : public QDialog {
  Q_OBJECT
 public:
  explicit ModelImportDialog(const ModelImport& imported, QWidget* parent = nullptr);

  const ModelImport& imported() const { return imported_; }
  QLabel* headline() const { return headline_; }
  // The imported value shown for a key (family, layers, hidden, heads, head_dim, ffn, vocab,
  // parameters...); null when the import failed.
  QLabel* value(const QString& key) const;
  QListWidget* ignoredList() const { return ignored_; }  // null when the import failed
  QTableWidget* problemTable() const { return table_; }  // null when the import succeeded
  QPushButton* useButton() const { return use_; }        // null when the import failed

 private:
  QWidget* buildSummary();
  QWidget* buildProblems();

  ModelImport imported_;
  QLabel* headline_;
  QList<QPair<QString, QLabel*>> values_;
  QListWidget* ignored_ = nullptr;
  QTableWidget* table_ = nullptr;
  QPushButton* use_ = nullptr;
};

}  // namespace remat::gui
