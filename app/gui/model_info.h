// What the app says about a model before it runs: its family and sizes (the preset picker's
// groups and tooltips), and the outcome of importing a model file (what was read, which fields
// were ignored, or every problem that refused it), which the import dialog shows.
#pragma once
#include <QList>
#include <QString>
#include <QStringList>
#include <cstdint>

#include "core/model/model_config.h"

namespace remat::gui {

// The family a model belongs to (our JSON's "architecture"): the picker's group.
QString model_family(const ModelConfig& m);
std::int64_t parameter_count(const ModelConfig& m);
QString human_count(double n);  // "124.4 M"
// One line of sizes: "12 layers · hidden 768 · 12 heads / 12 kv · ...".
QString model_sizes(const ModelConfig& m);

struct PresetInfo {
  QString name, family, description, sizes;
  QString error;  // the preset cannot be read (family "?")
};
// Every preset, grouped by family (families in alphabetical order, presets by name within).
QList<PresetInfo> preset_catalogue();

struct ImportProblem {
  QString field;   // "" when the file as a whole is unusable
  QString message;
  QString remedy;  // what to do about it
};

struct ModelImport {
  QString path;
  bool ok = false;
  ModelConfig config;  // when ok
  QList<ImportProblem> problems;  // when not ok: every problem the import found
};

// Reads our model JSON or a Hugging Face config.json, keeping every problem as its own row.
ModelImport import_model_file(const QString& path);

}  // namespace remat::gui
