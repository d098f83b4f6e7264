// rematlab-batch list policies | models
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "commands.h"
#include "core/model/model_source.h"
#include "core/util/paths.h"

namespace remat::cli {

namespace {

int list_policies(bool json) {
  PolicyRegistry reg;
  load_plugins(reg, true);  // a plugin that cannot be used is a warning on stderr
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& l : reg.policies()) {
      nlohmann::json p = {{"name", l.name}, {"description", l.description}, {"file", l.file}};
      p["params"] = nlohmann::json::array();
      for (const auto& d : l.params) {
        nlohmann::json dj = {{"name", d.name}, {"type", to_string(d.type)}, {"default", d.default_value}, {"help", d.help}};
        if (d.min < d.max) dj["range"] = {d.min, d.max};
        if (!d.choices.empty()) dj["choices"] = d.choices;
        p["params"].push_back(dj);
      }
      j.push_back(p);
    }
    nlohmann::json out = {{"policies", j}, {"rejected", nlohmann::json::array()}};
    for (const auto& r : reg.rejected()) out["rejected"].push_back({{"file", r.file}, {"reason", r.reason}});
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  for (const auto& l : reg.policies()) {
    std::cout << l.name << "  " << l.description << "\n";
    for (const auto& d : l.params) {
      std::cout << "    " << d.name << " (" << to_string(d.type);
      if (!d.default_value.empty()) std::cout << ", default " << d.default_value;
      if (d.min < d.max) std::cout << ", range " << d.min << ".." << d.max;
      if (!d.choices.empty()) {
        std::cout << ", one of";
        for (const auto& c : d.choices) std::cout << " " << c;
      }
      std::cout << ")  " << d.help << "\n";
    }
  }
  return 0;
}

int list_models(bool json) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& n : preset_names()) {
    ModelConfig m = resolve_model(n);
    if (json) {
      j.push_back(model_to_json(m));
    } else {
      std::cout << n << "  " << to_string(m.family) << " L=" << m.layers << " h=" << m.hidden
                << " heads=" << m.heads << "/" << m.kv_heads << " s=" << m.seq << " b=" << m.batch
                << " V=" << m.vocab << " dropout=" << m.dropout << " " << to_string(m.attention) << "\n";
    }
  }
  if (json) std::cout << j.dump(2) << "\n";
  return 0;
}

}  // namespace

void add_list_command(CLI::App& app, int& exit_code) {
  CLI::App* c = app.add_subcommand("list", "list what is available");
  c->require_subcommand(1);
  auto json = std::make_shared<bool>(false);
  CLI::App* p = c->add_subcommand("policies", "every loaded policy plugin with its parameters");
  p->add_flag("--json", *json, "as JSON");
  p->callback([json, &exit_code] { exit_code = list_policies(*json); });
  CLI::App* m = c->add_subcommand("models", "the model presets");
  m->add_flag("--json", *json, "as JSON");
  m->callback([json, &exit_code] {
    try {
      exit_code = list_models(*json);
    } catch (const std::exception& e) {
      exit_code = fail(e);
    }
  });
}

}  // namespace remat::cli
