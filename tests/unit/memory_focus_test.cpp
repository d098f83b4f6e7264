// The memory timeline narrowed to some categories: which categories "activations only" keeps,
// the value range fitted to the shown stack, and the largest tensors alive among the shown ones.
#include <gtest/gtest.h>

#include "core/analysis/memory_focus.h"

namespace remat {
namespace {

// Static memory far above a few small activations, and a host copy.
constexpr std::int64_t kParams = 50000, kOptim = 100000, kSaved = 300, kCkpt = 700, kWork = 64, kHost = 2000;

Trace static_over_activations() {
  Trace t;
  t.names = {"", "params", "exp_avg", "attn.probs", "x", "ws", "x.host"};
  auto ev = [&](std::int64_t delta, std::uint64_t id, Category c, std::uint32_t name, Space s = Space::Device) {
    MemoryEvent e;
    e.t_ns = static_cast<std::int64_t>(t.events.size());
    e.delta = delta;
    e.id = id;
    e.category = c;
    e.space = s;
    e.tensor = name;
    e.block = name >= 3 ? 0 : -1;
    t.events.push_back(e);
  };
  ev(kParams, 1, Category::Parameters, 1);
  ev(kOptim, 2, Category::OptimizerState, 2);
  ev(kSaved, 3, Category::SavedActivations, 3);  // event 2
  ev(kCkpt, 4, Category::Checkpoints, 4);        // event 3: activations at their peak
  ev(kWork, 5, Category::Workspace, 5);          // event 4: ... and the workspace on top
  ev(-kWork, 5, Category::Workspace, 5);
  ev(-kSaved, 3, Category::SavedActivations, 3);
  ev(kHost, 6, Category::HostOffloaded, 6, Space::Host);  // event 7
  ev(-kCkpt, 4, Category::Checkpoints, 4);
  return t;
}

TEST(MemoryFocus, ActivationsOnlyHidesTheFourStaticCategories) {
  const CategorySet a = activations_only();
  for (Category c : {Category::Parameters, Category::Gradients, Category::MasterWeights, Category::OptimizerState})
    EXPECT_FALSE(a[static_cast<int>(c)]) << to_string(c);
  for (Category c : {Category::SavedActivations, Category::Checkpoints, Category::RecomputeTemps,
                     Category::ActivationGrads, Category::LogitsLoss, Category::Workspace, Category::HostOffloaded})
    EXPECT_TRUE(a[static_cast<int>(c)]) << to_string(c);
  EXPECT_FALSE(shows_all(a));
  EXPECT_TRUE(shows_all(all_categories()));
}

TEST(MemoryFocus, TheValueRangeFitsTheShownStack) {
  const MemoryTimeline tl = memory_timeline(static_over_activations());
  // Everything: the static memory and the activations stacked on it.
  const StackPeak all = stacked_peak(tl, all_categories());
  EXPECT_EQ(all.bytes, kParams + kOptim + kSaved + kCkpt + kWork);
  EXPECT_EQ(all.bytes, tl.peak_device);
  // Activations only: the stack starts at 0 and reaches the activations' own peak; the host line
  // (shown) is higher still.
  CategorySet shown = activations_only();
  const StackPeak act = stacked_peak(tl, shown);
  EXPECT_EQ(act.bytes, kSaved + kCkpt + kWork);
  EXPECT_EQ(tl.points[act.point].event, 4);
  EXPECT_DOUBLE_EQ(fitted_value_top(tl, shown), kValueHeadroom * static_cast<double>(kHost));
  shown[static_cast<int>(Category::HostOffloaded)] = false;
  EXPECT_DOUBLE_EQ(fitted_value_top(tl, shown), kValueHeadroom * static_cast<double>(kSaved + kCkpt + kWork));
  shown[static_cast<int>(Category::Workspace)] = false;
  EXPECT_DOUBLE_EQ(fitted_value_top(tl, shown), kValueHeadroom * static_cast<double>(kSaved + kCkpt));
  // Only the optimizer state.
  CategorySet optim{};
  optim[static_cast<int>(Category::OptimizerState)] = true;
  EXPECT_DOUBLE_EQ(fitted_value_top(tl, optim), kValueHeadroom * static_cast<double>(kOptim));
  // Nothing that holds a byte: a small range, never an empty one.
  CategorySet none{};
  none[static_cast<int>(Category::Gradients)] = true;
  EXPECT_EQ(stacked_peak(tl, none).bytes, 0);
  EXPECT_GT(fitted_value_top(tl, none), 0.0);
}

TEST(MemoryFocus, LargestAliveLeavesHiddenCategoriesOut) {
  const Trace t = static_over_activations();
  const LiveTensorIndex live(t);
  // At the activations' peak the static tensors are the largest...
  auto top = live.largest_at(4, 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0]->category, Category::OptimizerState);
  EXPECT_EQ(top[1]->category, Category::Parameters);
  EXPECT_EQ(largest_shown(live, 4, 2, all_categories()), top);
  // ... and without them the activations, largest first.
  auto act = largest_shown(live, 4, 5, activations_only());
  ASSERT_EQ(act.size(), 3u);
  EXPECT_EQ(live.label(*act[0]), "h0.x");
  EXPECT_EQ(live.label(*act[1]), "h0.attn.probs");
  EXPECT_EQ(act[2]->category, Category::Workspace);
  for (const Allocation* a : act) EXPECT_FALSE(is_static(a->category));
}

}  // namespace
}  // namespace remat
