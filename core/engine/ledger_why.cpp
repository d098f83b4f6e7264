#include "core/engine/ledger_why.h"

#include <algorithm>
#include <cstdio>

namespace remat {

std::string flops_in_words(std::uint64_t flops) {
  static const char* unit[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"};
  double v = static_cast<double>(flops);
  int u = 0;
  while (v >= 999.5 && u < 6) v /= 1000.0, ++u;
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu FLOP", static_cast<unsigned long long>(flops));
  else std::snprintf(buf, sizeof buf, "%.3g %s", v, unit[u]);
  return buf;
}

namespace {

// "ln1, qkv, attn.core" (at most four names, then how many more).
std::string step_names(const BlockGraph& g, const std::vector<int>& steps) {
  std::string s;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (i == 4) return s + " and " + std::to_string(steps.size() - 4) + " more";
    if (i > 0) s += ", ";
    s += g.steps()[static_cast<std::size_t>(steps[i])].name;
  }
  return s;
}

std::vector<int> gemms_of(const BlockGraph& g, const std::vector<int>& steps) {
  std::vector<int> w;
  for (int s : steps)
    if (g.steps()[static_cast<std::size_t>(s)].kind == StepKind::Gemm) w.push_back(s);
  return w;
}

}  // namespace

std::string ledger_why(const BlockGraph& g, int block, const std::vector<bool>& held, int tensor,
                       const std::string& decision) {
  const bool input = tensor == g.input();
  if (decision == "checkpoint") return "the block's input: the backward runs the block's forward again from it";
  if (decision == "offloaded") return "in host memory from the forward to the backward";
  if (decision == "discarded") return "dropped after the forward; rebuilt before the backward reads it";
  if (input && decision == "recomputed") return "the block's input, rebuilt by the block before it in the backward";
  if (input) {
    if (g.first_block() + block == 0) return "the first block's input, made by the embedding";
    if (block == 0) return "the stage's first input, received from the stage before it";
    return "the block's input, made by the block before it";
  }
  std::vector<bool> live = held, target(g.tensors().size(), false);
  target[static_cast<std::size_t>(tensor)] = true;
  std::vector<int> steps;
  if (decision == "recomputed") {
    // From what the block held; a block inside a recomputed segment held nothing, its forward
    // runs again from its input (rebuilt first).
    live[static_cast<std::size_t>(tensor)] = false;
    const bool held_any = std::find(live.begin(), live.end(), true) != live.end();
    live[static_cast<std::size_t>(g.input())] = true;
    const auto f = g.recompute_flops(live, target, &steps, block);
    if (!f) return "rebuilt in the backward";
    return std::string(held_any ? "rebuilt from what the block held" : "rebuilt from the block's input") +
           "; alone it needs " + step_names(g, steps) + ": " + flops_in_words(*f);
  }
  // Kept: what giving it up would cost.
  live[static_cast<std::size_t>(tensor)] = false;
  const auto f = g.recompute_flops(live, target, &steps, block);
  if (!f) return "kept: nothing else the block keeps rebuilds it";
  const std::vector<int> w = gemms_of(g, steps);
  if (!w.empty())
    return "kept: rebuilding it runs a weight GEMM again (" + step_names(g, w) + "), " + flops_in_words(*f) + " in all";
  return "kept: rebuilding it would cost " + flops_in_words(*f) + " (" + step_names(g, steps) + ")";
}

}  // namespace remat
