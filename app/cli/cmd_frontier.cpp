// rematlab-batch frontier: the recompute FLOPs of a policy that plans to a memory budget,
// against the budget, with every other policy's point (core/analysis/frontier.h).
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <unistd.h>

#include "cli_common.h"
#include "commands.h"
#include "core/analysis/frontier.h"

namespace remat::cli {

namespace {

struct FrontierOptions {
  ModelOptions model;
  std::string policy = "budget";
  int points = 64;
  bool json = false;
};

std::string gflop(std::uint64_t f) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(2) << static_cast<double>(f) / 1e9;
  return o.str();
}

int frontier(const FrontierOptions& o) {
  const ModelConfig m = o.model.resolve();
  PolicyRegistry reg;
  load_plugins(reg, !o.json);
  const bool tty = isatty(STDERR_FILENO) != 0;  // progress on a terminal only
  auto progress = [&](int i, int n) {
    if (tty) std::cerr << "\rplanned " << i << " of " << n << (i == n ? "\n" : "") << std::flush;
  };
  const Frontier f = compute_frontier(reg, m, o.policy, o.points, true, progress);
  if (o.json) {
    nlohmann::json j;
    j["model"] = m.name;
    j["policy"] = f.policy;
    j["cost_unit"] = "recompute FLOPs";
    j["smallest_budget_bytes"] = f.smallest_budget;
    j["store_all_bytes"] = f.store_all_budget;
    j["line"] = nlohmann::json::array();
    for (const FrontierPoint& p : f.line)
      j["line"].push_back({{"budget_bytes", p.budget}, {"activation_peak_bytes", p.activation_peak},
                           {"recompute_flops", p.recompute_flops}, {"peak_bytes", p.peak},
                           {"offloaded_bytes", p.offloaded}, {"params", p.params}, {"from_smaller_budget", p.from_smaller_budget}});
    j["policies"] = nlohmann::json::array();
    for (const PolicyPoint& p : f.others) {
      nlohmann::json pj = {{"policy", p.policy}, {"params", p.params}};
      if (p.error.empty()) {
        pj["activation_peak_bytes"] = p.activation_peak;
        pj["recompute_flops"] = p.recompute_flops;
        pj["peak_bytes"] = p.peak;
        pj["offloaded_bytes"] = p.offloaded;
      } else {
        pj["error"] = p.error;
      }
      j["policies"].push_back(pj);
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  // The offloaded column, when the line offloads anywhere (the other policies' points have it then too).
  bool offloads = false;
  for (const FrontierPoint& p : f.line) offloads = offloads || p.offloaded > 0;
  std::cout << "frontier of " << f.policy << " on model " << m.name << ": recompute FLOPs against the activation budget\n"
            << "smallest budget " << human_bytes(f.smallest_budget) << " (" << f.smallest_budget << " bytes); "
            << "no recomputation from " << human_bytes(f.store_all_budget) << " (" << f.store_all_budget
            << " bytes, none's activation peak)\n\n"
            << "budget        activations   recompute GFLOP" << (offloads ? "   offloaded" : "") << "\n";
  for (const FrontierPoint& p : f.line) {
    std::cout << std::left << std::setw(14) << human_bytes(p.budget) << std::setw(14) << human_bytes(p.activation_peak);
    if (offloads) std::cout << std::setw(18) << gflop(p.recompute_flops) << human_bytes(p.offloaded);
    else std::cout << gflop(p.recompute_flops);
    std::cout << (p.from_smaller_budget ? "  (a smaller budget's plan)" : "") << "\n";
  }
  std::size_t w = 6;
  for (const PolicyPoint& p : f.others) w = std::max(w, p.policy.size());
  std::cout << "\n" << std::left << std::setw(static_cast<int>(w + 2)) << "policy"
            << "activations   recompute GFLOP   " << (offloads ? "offloaded     " : "") << "planned as\n";
  for (const PolicyPoint& p : f.others) {
    std::cout << std::left << std::setw(static_cast<int>(w + 2)) << p.policy;
    if (!p.error.empty()) {
      std::cout << "no plan: " << p.error << "\n";
      continue;
    }
    std::cout << std::setw(14) << human_bytes(p.activation_peak) << std::setw(18) << gflop(p.recompute_flops);
    if (offloads) std::cout << std::setw(14) << human_bytes(p.offloaded);
    std::cout << p.params << "\n";
  }
  return 0;
}

}  // namespace

void add_frontier_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<FrontierOptions>();
  CLI::App* c = app.add_subcommand(
      "frontier", "the recompute cost of a budget policy from its smallest budget to no recomputation, "
                  "with every other policy's point (nothing runs)");
  o->model.add(*c);
  c->add_option("--policy,-p", o->policy, "a policy that plans to a memory budget")->capture_default_str();
  c->add_option("--points", o->points, "budgets from the smallest to no recomputation")
      ->check(CLI::Range(2, 4096))
      ->capture_default_str();
  c->add_flag("--json", o->json, "print the line and the points as JSON");
  c->callback([o, &exit_code] {
    try {
      exit_code = frontier(*o);
    } catch (const std::exception& e) {
      exit_code = fail(e);
    }
  });
}

}  // namespace remat::cli
