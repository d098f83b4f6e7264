#include "core/plugin/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <sstream>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "core/engine/simulator.h"
#include "core/plugin/child_process.h"
#include "core/plugin/plugin_probe.h"
#include "core/schedule/validator.h"
#include "core/util/error.h"
#include "core/util/text_check.h"
#include "core/util/printable.h"
#include "core/util/paths.h"

namespace fs = std::filesystem;

namespace remat {

namespace {
constexpr const char* kPlanTimeoutVar = "REMAT_PLAN_TIMEOUT_S";
constexpr double kDefaultPlanTimeoutS = 60;
// A schedule of a million blocks is about 100 MB of JSON.
constexpr std::size_t kMaxPlanReplyBytes = std::size_t(256) << 20;
}  // namespace

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
    const std::string key = kv.substr(0, eq);
    if (!c.params.emplace(key, kv.substr(eq + 1)).second)
      throw ConfigError("policy", "parameter '" + key + "' of '" + c.name + "' is given twice in '" +
                                      text + "'");
  }
  return c;
}

PolicyRegistry::~PolicyRegistry() {
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

namespace {

// "" for a regular file (or a symbolic link to one), else what it is. Never opens it: opening a
// FIFO blocks, opening a device may do anything.
std::string not_a_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::string("cannot be examined: ") + std::strerror(errno);
  if (S_ISREG(st.st_mode)) return "";
  const char* what = S_ISFIFO(st.st_mode)   ? "a FIFO"
                     : S_ISDIR(st.st_mode)  ? "a directory"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "of an unknown kind";
  return std::string("not a regular file (it is ") + what + "); skipped without opening it";
}

}  // namespace

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
  // Its path is listed and written as JSON (list policies --json, a run's provenance).
  if (std::string bad = text_problem(path); !bad.empty()) {
    rejected_.push_back({printable(path, 1000), "its path " + bad + "; skipped without opening it"});
    return;
  }
  if (std::string why = not_a_regular_file(path); !why.empty()) {
    rejected_.push_back({path, why});
    return;
  }
  PolicyDeclaration decl;
  try {
    decl = probe_plugin(path);
    check_declaration(decl);
  } catch (const std::exception& e) {
    rejected_.push_back({path, e.what()});
    return;
  }
  for (const auto& l : loaded_)
    if (l.name == decl.name) {
      rejected_.push_back({path, "duplicates policy '" + decl.name + "' already loaded from " + l.file});
      return;
    }
  // It passed the probe: loading it here runs the same static initializers again.
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
  loaded_.push_back({path, decl.name, decl.description, decl.params, decl.takes_memory_budget, entry, h});
}

const LoadedPolicy* PolicyRegistry::find(const std::string& name) const {
  for (const auto& l : loaded_)
    if (l.name == name) return &l;
  return nullptr;
}

std::vector<std::string> PolicyRegistry::names() const {
  std::vector<std::string> n;
  for (const auto& l : loaded_) n.push_back(l.name);
  return n;
}

std::unique_ptr<Policy> create_policy_in_process(const LoadedPolicy& p) {
  std::unique_ptr<Policy> pol;
  try {
    const RematPolicyPlugin* info = p.entry();
    if (info && info->create) pol.reset(info->create());
  } catch (const std::exception& e) {
    throw Error("policy '" + p.name + "' (" + p.file + "): its factory failed: " + e.what());
  } catch (...) {
    throw Error("policy '" + p.name + "' (" + p.file + "): its factory threw a non-standard exception");
  }
  if (!pol) throw Error("policy '" + p.name + "' (" + p.file + "): its factory returned nothing");
  return pol;
}

double PolicyRegistry::plan_timeout_s() const {
  return plan_timeout_s_ > 0 ? plan_timeout_s_ : timeout_from_env(kPlanTimeoutVar, kDefaultPlanTimeoutS);
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

ParamValues PolicyRegistry::check_params(const LoadedPolicy& p, const std::map<std::string, std::string>& given,
                                         const BlockGraph* graph) const {
  ParamValues v;
  const auto& decls = p.params;
  for (const auto& [k, val] : given) {
    bool known = false;
    for (const auto& d : decls) known = known || d.name == k;
    if (!known) {
      std::string names;
      for (const auto& d : decls) names += (names.empty() ? "" : ", ") + d.name;
      throw ConfigError(p.name + ":" + k, "unknown parameter of policy '" + p.name + "'" +
                                                 (names.empty() ? " (it has none)" : " (parameters: " + names + ")"));
    }
  }
  for (const auto& d : decls) {
    std::string field = p.name + ":" + d.name;
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
          auto in_a_table = [&](const std::string& t) {
            for (int i = 0; i < graph->table_count(); ++i)
              if (graph->table(i).find(t)) return true;
            return false;
          };
          while (std::getline(ss, n, '+'))
            if (!n.empty() && !in_a_table(n)) {
              std::string known;
              for (int i = 0; i < graph->table_count(); ++i)
                for (const auto& s : graph->table(i).saved_names())
                  if (known.find(s) == std::string::npos) known += (known.empty() ? "" : ", ") + s;
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
  return plan(choice, BlockGraph(m), memory_budget, costs);
}

const LoadedPolicy& PolicyRegistry::policy_for(const PolicyChoice& choice, bool with_budget) const {
  const LoadedPolicy* lp = find(choice.name);
  if (!lp) {
    std::string known;
    for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError("policy", "unknown policy '" + choice.name + "' (loaded: " +
                                    (known.empty() ? "none; check the plugin directory" : known) + ")");
  }
  if (with_budget && !lp->takes_memory_budget) {
    std::string takers;
    for (const auto& l : loaded_)
      if (l.takes_memory_budget) takers += (takers.empty() ? "" : ", ") + l.name;
    throw ConfigError("memory-budget", "policy '" + choice.name + "' takes no memory budget (" +
                                           (takers.empty() ? std::string("no loaded policy does")
                                                           : "policies that do: " + takers) + ")");
  }
  return *lp;
}

PlanContext PolicyRegistry::context_for(const LoadedPolicy& lp, const PolicyChoice& choice, const BlockGraph& g,
                                        const StepCosts* costs) const {
  const ModelConfig& m = g.config();
  PlanContext ctx;
  ctx.model = &m;
  ctx.graph = &g;
  ctx.blocks = m.layers;
  ctx.params = check_params(lp, choice.params, &g);
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
  ctx.activation_peak = [&g](const Schedule& s) { return simulate(g, s, nullptr).activation_peak_bytes; };
  return ctx;
}

nlohmann::json PolicyRegistry::run_policy(const LoadedPolicy& lp, const std::string& who, double timeout_s,
                                          const std::function<nlohmann::json(const Policy&)>& work) const {
  ChildLimits limits;
  limits.timeout_s = timeout_s;
  limits.max_reply_bytes = kMaxPlanReplyBytes;
  limits.memory_bytes = memory_from_env(kPluginMemoryVar, kDefaultPluginMemory);
  limits.reply_name = "plan reply";
  limits.timeout_hint = std::string(kPlanTimeoutVar) + " sets the limit in seconds";
  try {
    // In the child: the policy is created, plans, and is never destroyed (the child _exits).
    return run_in_child(
        [&] {
          const RematPolicyPlugin* info = lp.entry();
          if (!info || !info->create) throw Error("its entry point gives no factory");
          const Policy* p = info->create();
          if (!p) throw Error("its factory returned nothing");
          return work(*p);
        },
        limits);
  } catch (const Error& e) {
    throw Error(who + " could not plan: " + e.what());
  }
}

// A schedule as a plugin sent it, read, completed with the defaults and validated (Error naming who).
static Schedule checked_schedule(const nlohmann::json& reply, const std::string& who, const PolicyChoice& choice,
                                 const PlanContext& ctx, const BlockGraph& g) {
  Schedule s;
  try {
    s = schedule_from_json(reply);
  } catch (const Error& e) {
    throw Error(who + " sent a schedule that cannot be read: " + e.what());
  }
  if (s.policy.empty()) s.policy = choice.name;
  if (s.params.empty()) s.params = ctx.params.to_string();
  if (s.blocks == 0) s.blocks = g.config().layers;
  try {
    validate_schedule(s, g);
  } catch (const ScheduleError& e) {
    throw Error(who + " returned a schedule the validator refuses: " + e.what());
  }
  return s;
}

Schedule PolicyRegistry::plan(const PolicyChoice& choice, const BlockGraph& g,
                              std::optional<std::uint64_t> memory_budget,
                              const StepCosts* costs) const {
  const LoadedPolicy& lp = policy_for(choice, memory_budget.has_value());
  PlanContext ctx = context_for(lp, choice, g, costs);
  ctx.memory_budget = memory_budget;
  const std::string who = "policy '" + choice.name + "' (" + lp.file + ")";
  const nlohmann::json reply =
      run_policy(lp, who, plan_timeout_s(), [&](const Policy& p) { return schedule_to_json(p.plan(ctx)); });
  return checked_schedule(reply, who, choice, ctx, g);
}

std::vector<BudgetedPlan> PolicyRegistry::plan_budgets(const PolicyChoice& choice, const BlockGraph& g,
                                                       const std::vector<std::uint64_t>& budgets,
                                                       const StepCosts* costs) const {
  const LoadedPolicy& lp = policy_for(choice, true);
  const PlanContext ctx = context_for(lp, choice, g, costs);
  const std::string who = "policy '" + choice.name + "' (" + lp.file + ")";
  if (budgets.empty()) return {};
  const nlohmann::json reply =
      run_policy(lp, who, plan_timeout_s() * static_cast<double>(budgets.size()), [&](const Policy& p) {
        nlohmann::json plans = nlohmann::json::array();
        for (const BudgetedPlan& b : p.plan_budgets(ctx, budgets))
          plans.push_back(b.schedule ? schedule_to_json(*b.schedule) : nlohmann::json{{"error", b.error}});
        return nlohmann::json{{"plans", plans}};
      });
  const auto plans = reply.find("plans");
  if (plans == reply.end() || !plans->is_array() || plans->size() != budgets.size())
    throw Error(who + " sent " + (plans != reply.end() && plans->is_array() ? std::to_string(plans->size()) : "no list of") +
                " plans for " + std::to_string(budgets.size()) + " budgets");
  std::vector<BudgetedPlan> out;
  for (const nlohmann::json& one : *plans) {
    BudgetedPlan b;
    try {
      if (one.is_object() && one.size() == 1 && one.contains("error")) {
        b.error = who + " could not plan: " + (one["error"].is_string() ? one["error"].get<std::string>() : std::string("(no message)"));
      } else {
        b.schedule = checked_schedule(one, who, choice, ctx, g);
      }
    } catch (const Error& e) {
      b.error = e.what();
    }
    out.push_back(std::move(b));
  }
  return out;
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
