#include "core/plugin/policy.h"

#include <exception>
#include <sstream>

#include "core/util/error.h"

namespace remat {

const char* to_string(ParamType t) {
  static const char* n[] = {"int", "float", "bool", "string", "names"};
  return n[static_cast<int>(t)];
}

long long ParamValues::get_int(const std::string& k) const { return std::stoll(values_.at(k)); }
double ParamValues::get_float(const std::string& k) const { return std::stod(values_.at(k)); }
bool ParamValues::get_bool(const std::string& k) const {
  const std::string& v = values_.at(k);
  return v == "true" || v == "1" || v == "yes" || v == "on";
}
std::string ParamValues::get_string(const std::string& k) const { return values_.at(k); }
std::vector<std::string> ParamValues::get_names(const std::string& k) const {
  std::vector<std::string> out;
  std::stringstream ss(values_.at(k));
  std::string item;
  while (std::getline(ss, item, '+'))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string ParamValues::to_string() const {
  std::string s;
  for (const auto& [k, v] : values_) s += (s.empty() ? "" : ",") + k + "=" + v;
  return s;
}

std::vector<BudgetedPlan> Policy::plan_budgets(const PlanContext& ctx, const std::vector<std::uint64_t>& budgets) const {
  std::vector<BudgetedPlan> out;
  PlanContext one = ctx;
  for (std::uint64_t b : budgets) {
    one.memory_budget = b;
    BudgetedPlan p;
    try {
      p.schedule = plan(one);
    } catch (const std::exception& e) {  // an Error, or whatever a plugin's plan() throws
      p.error = e.what();
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace remat
