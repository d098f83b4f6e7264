#include "core/plugin/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <sstream>

#include "core/engine/simulator.h"
#include "core/schedule/validator.h"
#include "core/util/error.h"
#include "core/util/paths.h"

namespace fs = std::filesystem;

namespace remat {

PolicyChoice parse_policy_choice(const std::string& text) {
  PolicyChoice c;
  auto colon = text.find(':');
  c.name = text.substr(0, colon);
  if (c.name.empty()) throw ConfigError("policy", "empty policy name in '" + text + "'");
  if (colon == std::string::npos) return c;
  std::stringstream ss(text.substr(colon + 1));
  std::string kv;
  while (std::getline(ss, kv, ',')) {
    if (kv.empty()) continue;
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError("policy", "parameter '" + kv + "' of '" + c.name + "' is not name=value");
    c.params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return c;
}

PolicyRegistry::~PolicyRegistry() {
  for (auto& l : loaded_) l.policy.reset();
  for (auto& l : loaded_)
    if (l.handle) dlclose(l.handle);
}

std::vector<std::string> PolicyRegistry::default_dirs() {
  std::vector<std::string> dirs;
  fs::path exe = executable_dir();
  dirs.push_back((exe / "plugins").string());
  dirs.push_back((exe / ".." / "lib" / "rematlab" / "plugins").string());
  if (const char* env = std::getenv("REMAT_PLUGIN_PATH"); env && *env) {
    std::stringstream ss(env);
    std::string d;
    // Only absolute entries: a relative one would be looked up from the working directory.
    while (std::getline(ss, d, ':'))
      if (!d.empty() && fs::path(d).is_absolute()) dirs.push_back(d);
  }
  return dirs;
}

void PolicyRegistry::load_dirs(const std::vector<std::string>& dirs) {
  std::vector<std::string> seen;
  for (const auto& d : dirs) {
    std::error_code ec;
    fs::path canon = fs::weakly_canonical(d, ec);
    if (ec || !fs::is_directory(canon, ec)) continue;
    if (std::find(seen.begin(), seen.end(), canon.string()) != seen.end()) continue;
    seen.push_back(canon.string());
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(canon, ec))
      if (e.path().extension() == ".so") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) load_file(f.string());
  }
}

void PolicyRegistry::load_file(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    rejected_.push_back({path, std::string("cannot be loaded: ") + (e ? e : "unknown error")});
    return;
  }
  auto entry = reinterpret_cast<RematPolicyEntry>(dlsym(h, "remat_policy_plugin"));
  if (!entry) {
    rejected_.push_back({path, "not a RematLab policy plugin (no remat_policy_plugin symbol)"});
    dlclose(h);
    return;
  }
  const RematPolicyPlugin* info = nullptr;
  std::unique_ptr<Policy> pol;
  std::string failure;
  // The library stays loaded until the exception it threw is gone: the exception object (and
  // its destructor) may live in the library, so it is closed only after the catch block.
  try {
    info = entry();
    if (!info) throw Error("the entry point returned nothing");
    if (info->abi_version != REMAT_POLICY_ABI_VERSION) {
      failure = "built for policy ABI version " + std::to_string(info->abi_version) +
                ", this program needs version " + std::to_string(REMAT_POLICY_ABI_VERSION);
    } else {
      if (!info->create) throw Error("no factory");
      pol.reset(info->create());
      if (!pol) throw Error("the factory returned nothing");
      if (pol->name().empty()) throw Error("the policy has an empty name");
      (void)pol->params();  // a policy that cannot describe its parameters cannot be chosen
    }
  } catch (const std::exception& e) {
    failure = std::string("its factory failed: ") + e.what();
  } catch (...) {
    failure = "its factory threw a non-standard exception";
  }
  if (!failure.empty()) {
    pol.reset();
    rejected_.push_back({path, failure});
    dlclose(h);
    return;
  }
  for (const auto& l : loaded_)
    if (l.policy->name() == pol->name()) {
      rejected_.push_back({path, "duplicates policy '" + pol->name() + "' already loaded from " + l.file});
      pol.reset();
      dlclose(h);
      return;
    }
  loaded_.push_back({path, std::move(pol), h});
}

const Policy* PolicyRegistry::find(const std::string& name) const {
  for (const auto& l : loaded_)
    if (l.policy->name() == name) return l.policy.get();
  return nullptr;
}

std::vector<std::string> PolicyRegistry::names() const {
  std::vector<std::string> n;
  for (const auto& l : loaded_) n.push_back(l.policy->name());
  return n;
}

namespace {

bool parse_number(const std::string& s, double& out, bool integer) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  if (integer) {
    long long v = std::strtoll(s.c_str(), &end, 10);
    out = static_cast<double>(v);
  } else {
    out = std::strtod(s.c_str(), &end);
  }
  return errno == 0 && end && *end == '\0' && std::isfinite(out);
}

}  // namespace

ParamValues PolicyRegistry::check_params(const Policy& p, const std::map<std::string, std::string>& given,
                                         const BlockGraph* graph) const {
  ParamValues v;
  auto decls = p.params();
  for (const auto& [k, val] : given) {
    bool known = false;
    for (const auto& d : decls) known = known || d.name == k;
    if (!known) {
      std::string names;
      for (const auto& d : decls) names += (names.empty() ? "" : ", ") + d.name;
      throw ConfigError(p.name() + ":" + k, "unknown parameter of policy '" + p.name() + "'" +
                                                 (names.empty() ? " (it has none)" : " (parameters: " + names + ")"));
    }
  }
  for (const auto& d : decls) {
    std::string field = p.name() + ":" + d.name;
    auto it = given.find(d.name);
    std::string val = it != given.end() ? it->second : d.default_value;
    if (val.empty() && d.type != ParamType::Names && d.type != ParamType::String) continue;
    double x = 0;
    switch (d.type) {
      case ParamType::Int:
      case ParamType::Float:
        if (!parse_number(val, x, d.type == ParamType::Int))
          throw ConfigError(field, "expects " + std::string(d.type == ParamType::Int ? "an integer" : "a number") +
                                       ", got '" + val + "'");
        if (d.min < d.max && (x < d.min || x > d.max)) {
          std::ostringstream os;
          os << "must be in [" << d.min << ", " << d.max << "], got " << val;
          throw ConfigError(field, os.str());
        }
        break;
      case ParamType::Bool:
        if (val != "true" && val != "false" && val != "1" && val != "0" && val != "yes" && val != "no")
          throw ConfigError(field, "expects true or false, got '" + val + "'");
        break;
      case ParamType::String:
        if (!d.choices.empty() && std::find(d.choices.begin(), d.choices.end(), val) == d.choices.end()) {
          std::string c;
          for (const auto& ch : d.choices) c += (c.empty() ? "" : " | ") + ch;
          throw ConfigError(field, "expects one of " + c + ", got '" + val + "'");
        }
        break;
      case ParamType::Names:
        if (graph) {
          std::stringstream ss(val);
          std::string n;
          while (std::getline(ss, n, '+'))
            if (!n.empty() && !graph->find(n)) {
              std::string known;
              for (const auto& s : graph->saved_names()) known += (known.empty() ? "" : ", ") + s;
              throw ConfigError(field, "'" + n + "' is not a tensor of this model's blocks (saved tensors: " + known + ")");
            }
        }
        break;
    }
    v.set(d.name, val);
  }
  return v;
}

Schedule PolicyRegistry::plan(const PolicyChoice& choice, const ModelConfig& m,
                              std::optional<std::uint64_t> memory_budget,
                              const StepCosts* costs) const {
  const LoadedPolicy* lp = nullptr;
  for (const auto& l : loaded_)
    if (l.policy->name() == choice.name) lp = &l;
  if (!lp) {
    std::string known;
    for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError("policy", "unknown policy '" + choice.name + "' (loaded: " +
                                    (known.empty() ? "none; check the plugin directory" : known) + ")");
  }
  BlockGraph g(m);
  PlanContext ctx;
  ctx.model = &m;
  ctx.graph = &g;
  ctx.blocks = m.layers;
  ctx.params = check_params(*lp->policy, choice.params, &g);
  if (costs) {
    if (costs->cost.size() != g.steps().size())
      throw Error("step costs (" + costs->unit + "): " + std::to_string(costs->cost.size()) +
                  " given for the " + std::to_string(g.steps().size()) + " steps of a block");
    for (std::size_t i = 0; i < costs->cost.size(); ++i)
      if (!std::isfinite(costs->cost[i]) || costs->cost[i] < 0)
        throw Error("step costs (" + costs->unit + "): the cost of step '" + g.steps()[i].name +
                    "' is not a finite non-negative number");
    ctx.step_cost = costs->cost;
    ctx.cost_unit = costs->unit;
  } else {
    for (const auto& s : g.steps()) ctx.step_cost.push_back(static_cast<double>(s.flops_fwd));
  }
  ctx.memory_budget = memory_budget;
  ctx.activation_peak = [&m](const Schedule& s) { return simulate(m, s, nullptr).activation_peak_bytes; };
  Schedule s;
  try {
    s = lp->policy->plan(ctx);
  } catch (const std::exception& e) {
    throw Error("policy '" + choice.name + "' (" + lp->file + ") could not plan: " + e.what());
  } catch (...) {
    throw Error("policy '" + choice.name + "' (" + lp->file + ") threw a non-standard exception");
  }
  if (s.policy.empty()) s.policy = choice.name;
  if (s.params.empty()) s.params = ctx.params.to_string();
  if (s.blocks == 0) s.blocks = m.layers;
  try {
    validate_schedule(s, g);
  } catch (const ScheduleError& e) {
    throw Error("policy '" + choice.name + "' (" + lp->file +
                ") returned a schedule the validator refuses: " + e.what());
  }
  return s;
}

std::uint64_t parse_bytes(const std::string& field, const std::string& text) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  double num = 0;
  if (i == 0 || !parse_number(text.substr(0, i), num, false) || num < 0)
    throw ConfigError(field, "expects a size such as 4096, 512MiB or 2GB, got '" + text + "'");
  std::string unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  double mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "KiB" || unit == "K") mult = 1024.0;
  else if (unit == "MiB" || unit == "M") mult = 1024.0 * 1024;
  else if (unit == "GiB" || unit == "G") mult = 1024.0 * 1024 * 1024;
  else if (unit == "TiB" || unit == "T") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kB" || unit == "KB") mult = 1e3;
  else if (unit == "MB") mult = 1e6;
  else if (unit == "GB") mult = 1e9;
  else if (unit == "TB") mult = 1e12;
  else throw ConfigError(field, "unknown size unit '" + unit + "' in '" + text + "' (B, KiB, MiB, GiB, KB, MB, GB)");
  double v = num * mult;
  if (v > 1.8e19) throw ConfigError(field, "size '" + text + "' is too large");
  return static_cast<std::uint64_t>(std::llround(v));
}

}  // namespace remat
