#include "model_info.h"

#include <QCoreApplication>
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "core/model/model_source.h"
#include "core/model/param_layout.h"
#include "core/util/error.h"
#include "core/util/json_io.h"
#include "core/util/paths.h"

namespace remat::gui {

namespace {

QString tr(const char* s) { return QCoreApplication::translate("ModelImport", s); }

// What to do about a refused field, from the kind of problem its message names.
QString remedy_for(const QString& field, const QString& message) {
  const QString f = field.isEmpty() ? tr("the file") : field;
  if (field.isEmpty()) return tr("Open a model JSON or a Hugging Face config.json that can be read");
  if (message.contains("missing")) return tr("Add %1 to the file").arg(f);
  if (message.startsWith("Hugging Face field not modelled"))
    return tr("RematLab cannot train with %1 yet: remove it only if the training step stays the same").arg(f);
  for (const char* v : {"true", "false"})
    if (message.startsWith(QString(v) + " is not modelled"))
      return tr("Set %1 to %2 (what RematLab trains), or remove it, only if that keeps the model you mean")
          .arg(f, QString(v) == "true" ? "false" : "true");
  if (message.contains("not modelled"))
    return tr("Use a value of %1 that RematLab models (the problem names it), only if that keeps the "
              "model you mean")
        .arg(f);
  if (message.startsWith("unknown field"))
    return tr("Remove %1: it is not a key of RematLab's model JSON (docs/model-config.md)").arg(f);
  if (message.contains("unsupported") || message.contains("unknown"))
    return tr("Use one of the values the message names for %1").arg(f);
  return tr("Correct %1 as the message says").arg(f);
}

ImportProblem problem(const std::string& field, const std::string& message) {
  const QString f = QString::fromStdString(field), m = QString::fromStdString(message);
  return {f, m, remedy_for(f, m)};
}

// A ConfigError's message without the "field: " its what() starts with.
std::string message_of(const ConfigError& e) {
  const std::string what = e.what(), prefix = e.field() + ": ";
  return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
}

}  // namespace

QString model_family(const ModelConfig& m) { return QString::fromUtf8(to_string(m.family)); }

std::int64_t parameter_count(const ModelConfig& m) { return ParamLayout(m).total(); }

QString human_count(double n) {
  static const char* u[] = {"", " K", " M", " B", " T"};
  int i = 0;
  while (n >= 1000.0 && i < 4) {
    n /= 1000.0;
    ++i;
  }
  return QString::number(n, 'f', i == 0 ? 0 : n >= 100 ? 0 : 1) + u[i];
}

QString model_sizes(const ModelConfig& m) {
  return tr("%1 layers · hidden %2 · %3 heads / %4 kv · head_dim %5 · ffn %6 · vocab %7 · "
            "seq %8 × batch %9")
             .arg(m.layers)
             .arg(m.hidden)
             .arg(m.heads)
             .arg(m.kv_heads)
             .arg(m.head_dim())
             .arg(m.ffn)
             .arg(m.vocab)
             .arg(m.seq)
             .arg(m.batch) +
         (m.mla.on() ? tr(" · latent attention (kv rank %1, values %2)").arg(m.mla.kv_rank).arg(m.mla.v_dim) : QString()) +
         (m.moe.on() ? tr(" · %1 experts, top-%2").arg(m.moe.experts).arg(m.moe.top_k) : QString()) +
         tr(" · %1 parameters").arg(human_count(static_cast<double>(parameter_count(m))));
}

QList<PresetInfo> preset_catalogue() {
  std::map<QString, QList<PresetInfo>> by_family;
  for (const auto& n : preset_names()) {
    PresetInfo p;
    p.name = QString::fromStdString(n);
    try {
      const ModelConfig m = resolve_model(n);
      p.family = model_family(m);
      p.sizes = model_sizes(m);
      const nlohmann::json j = read_json_file(preset_path(n));
      if (j.contains("description") && j.at("description").is_string())
        p.description = QString::fromStdString(j.at("description").get<std::string>());
    } catch (const std::exception& e) {
      p.family = "?";
      p.error = QString::fromStdString(e.what());
    }
    by_family[p.family].push_back(p);
  }
  QList<PresetInfo> out;
  for (const auto& [family, presets] : by_family) out += presets;
  return out;
}

ModelImport import_model_file(const QString& path) {
  ModelImport r;
  r.path = path;
  try {
    r.config = load_model_file(path.toStdString());
    r.ok = true;
  } catch (const ConfigProblems& e) {
    for (const auto& [field, message] : e.problems()) r.problems.push_back(problem(field, message));
  } catch (const ConfigError& e) {
    r.problems.push_back(problem(e.field(), message_of(e)));
  } catch (const std::exception& e) {
    r.problems.push_back(problem("", e.what()));
  }
  return r;
}

}  // namespace remat::gui
