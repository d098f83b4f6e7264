// What a byte of tracked memory is for, when it was made, and where it lives.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace remat {

enum class Category : std::uint8_t {
  Parameters,
  Gradients,
  MasterWeights,
  OptimizerState,
  SavedActivations,
  Checkpoints,
  RecomputeTemps,
  ActivationGrads,
  LogitsLoss,
  Workspace,
  HostOffloaded,
  Unknown,  // imported traces that do not say what the memory is for
  Count
};
constexpr int kNumCategories = static_cast<int>(Category::Count);

enum class Phase : std::uint8_t { Init, Forward, Recompute, Backward, Optimizer, Count };
constexpr int kNumPhases = static_cast<int>(Phase::Count);

enum class Space : std::uint8_t { Device, Host };

const char* to_string(Category c);
const char* to_string(Phase p);
const char* to_string(Space s);
std::optional<Category> category_from_string(std::string_view s);
std::optional<Phase> phase_from_string(std::string_view s);
std::optional<Space> space_from_string(std::string_view s);

// Categories that hold what the blocks save (the activation budget counts these).
inline bool is_activation(Category c) {
  return c == Category::SavedActivations || c == Category::Checkpoints ||
         c == Category::RecomputeTemps;
}

}  // namespace remat
