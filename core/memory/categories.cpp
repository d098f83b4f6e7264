#include "core/memory/categories.h"

namespace remat {

namespace {
const char* kCategoryNames[] = {"parameters",       "gradients",          "master_weights",
                                "optimizer_state",  "saved_activations",  "checkpoints",
                                "recompute_temps",  "activation_grads",   "logits_loss",
                                "workspace",        "host_offloaded",     "unknown"};
const char* kPhaseNames[] = {"init", "forward", "recompute", "backward", "optimizer"};
}  // namespace

const char* to_string(Category c) { return kCategoryNames[static_cast<int>(c)]; }
const char* to_string(Phase p) { return kPhaseNames[static_cast<int>(p)]; }
const char* to_string(Space s) { return s == Space::Device ? "device" : "host"; }

std::optional<Category> category_from_string(std::string_view s) {
  for (int i = 0; i < kNumCategories; ++i)
    if (s == kCategoryNames[i]) return static_cast<Category>(i);
  return std::nullopt;
}
std::optional<Phase> phase_from_string(std::string_view s) {
  for (int i = 0; i < kNumPhases; ++i)
    if (s == kPhaseNames[i]) return static_cast<Phase>(i);
  return std::nullopt;
}
std::optional<Space> space_from_string(std::string_view s) {
  if (s == "device") return Space::Device;
  if (s == "host") return Space::Host;
  return std::nullopt;
}

}  // namespace remat
