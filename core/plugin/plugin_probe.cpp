#include "core/plugin/plugin_probe.h"

#include <dlfcn.h>

#include <nlohmann/json.hpp>

#include "core/plugin/child_process.h"
#include "core/util/error.h"
#include "core/util/printable.h"

namespace remat {

namespace {

constexpr std::size_t kMaxNameLength = 64;
constexpr ParamType kParamTypes[] = {ParamType::Int, ParamType::Float, ParamType::Bool, ParamType::String,
                                     ParamType::Names};

// Calls into the plugin; an exception becomes Error saying which call failed.
template <class F>
auto guarded(const char* call, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    throw Error(std::string(call) + " failed: " + e.what());
  } catch (...) {
    throw Error(std::string(call) + " threw a non-standard exception");
  }
}

nlohmann::json param_to_json(const ParamDecl& d) {
  return {{"name", d.name}, {"type", to_string(d.type)}, {"default", d.default_value}, {"min", d.min},
          {"max", d.max},   {"choices", d.choices},      {"help", d.help}};
}

ParamDecl param_from_json(const nlohmann::json& j) {
  ParamDecl d;
  d.name = j.at("name").get<std::string>();
  const std::string type = j.at("type").get<std::string>();
  bool known = false;
  for (ParamType t : kParamTypes)
    if (type == to_string(t)) d.type = t, known = true;
  if (!known) throw Error("unknown parameter type '" + type + "'");
  d.default_value = j.at("default").get<std::string>();
  d.min = j.at("min").get<double>();
  d.max = j.at("max").get<double>();
  d.choices = j.at("choices").get<std::vector<std::string>>();
  d.help = j.at("help").get<std::string>();
  return d;
}

// In the probe child: everything the program needs to know of the plugin, as JSON.
nlohmann::json declare(const std::string& path) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    throw Error(std::string("cannot be loaded: ") + (e ? e : "unknown error"));
  }
  auto entry = reinterpret_cast<RematPolicyEntry>(::dlsym(h, "remat_policy_plugin"));
  if (!entry) throw Error("not a RematLab policy plugin (no remat_policy_plugin symbol)");
  const RematPolicyPlugin* info = guarded("its entry point", [&] { return entry(); });
  if (!info) throw Error("its entry point returned nothing");
  if (info->abi_version != REMAT_POLICY_ABI_VERSION)
    throw Error("built for policy ABI version " + std::to_string(info->abi_version) +
                ", this program needs version " + std::to_string(REMAT_POLICY_ABI_VERSION));
  if (!info->create) throw Error("its factory failed: no factory");
  // Never destroyed: the child ends with _exit.
  const Policy* p = guarded("its factory", [&] { return info->create(); });
  if (!p) throw Error("its factory failed: the factory returned nothing");
  nlohmann::json j;
  j["name"] = guarded("its name()", [&] { return p->name(); });
  j["description"] = guarded("its description()", [&] { return p->description(); });
  j["takes_memory_budget"] = guarded("its takes_memory_budget()", [&] { return p->takes_memory_budget(); });
  j["params"] = nlohmann::json::array();
  // A policy that cannot describe its parameters cannot be chosen.
  for (const auto& d : guarded("its params()", [&] { return p->params(); })) j["params"].push_back(param_to_json(d));
  return j;
}

bool has_control_or_comma(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == ',') return true;
  return false;
}

}  // namespace

PolicyDeclaration probe_plugin(const std::string& path, double timeout_s) {
  ChildLimits limits;
  limits.timeout_s = timeout_s;
  limits.max_reply_bytes = 1 << 20;
  limits.memory_bytes = memory_from_env(kPluginMemoryVar, kDefaultPluginMemory);
  limits.reply_name = "load probe reply";
  nlohmann::json j;
  try {
    j = run_in_child([&] { return declare(path); }, limits);
  } catch (const ChildProcessError& e) {  // what declare() threw is the reason itself
    throw Error(std::string("its load probe failed: ") + e.what());
  }
  return declaration_from_reply(j);
}

PolicyDeclaration declaration_from_reply(const nlohmann::json& j) {
  try {
    PolicyDeclaration d;
    d.name = j.at("name").get<std::string>();
    d.description = j.at("description").get<std::string>();
    d.takes_memory_budget = j.at("takes_memory_budget").get<bool>();
    for (const auto& p : j.at("params")) d.params.push_back(param_from_json(p));
    return d;
  } catch (const std::exception& e) {
    throw Error(std::string("its load probe sent declarations that cannot be read: ") + e.what());
  }
}

bool is_choosable_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

void check_declaration(const PolicyDeclaration& d) {
  const std::string rule = "names are 1 to " + std::to_string(kMaxNameLength) + " of a-z0-9_-";
  if (!is_choosable_name(d.name))
    throw Error("declares the policy name '" + printable(d.name) +
                "', which cannot be chosen with --policy NAME:key=value (" + rule + ")");
  for (std::size_t i = 0; i < d.params.size(); ++i) {
    const ParamDecl& p = d.params[i];
    if (!is_choosable_name(p.name))
      throw Error("declares a parameter '" + printable(p.name) + "' of policy '" + d.name +
                  "' that cannot be given as " + d.name + ":key=value (" + rule + ")");
    for (std::size_t k = 0; k < i; ++k)
      if (d.params[k].name == p.name)
        throw Error("declares the parameter '" + p.name + "' of policy '" + d.name + "' twice");
    for (const auto& c : p.choices)
      if (c.empty() || has_control_or_comma(c))
        throw Error("declares a choice '" + printable(c) + "' of parameter '" + d.name + ":" + p.name +
                    "' that cannot be given (empty, or with a comma or a control character)");
  }
}

}  // namespace remat
