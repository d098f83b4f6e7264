// GPT-2 style initial weights, keyed by seed: matrices N(0, 0.02) (residual projections
// N(0, 0.02 / sqrt(2L))), norm weights 1, biases 0. Each matrix draws from its own Philox key,
// so any part of any parameter can be computed on its own: the values do not depend on how
// the work is split or on the thread count.
#pragma once
#include <cstdint>
#include <vector>

#include "core/model/param_layout.h"
#include "core/util/philox.h"

namespace remat {

// The Philox key of parameter `index` (its position in the layout) for `seed`.
DropoutKey weight_init_key(std::uint64_t seed, std::size_t index);

// Elements [begin, end) of a parameter of `numel` values drawn N(0, stddev) with key `key`,
// written to out[0, end - begin). begin must be a multiple of 4, end a multiple of 4 or numel.
// Box-Muller on the uniform bits of elements (i, i + 1), i even: cos to i, sin to i + 1.
void normal_values(const DropoutKey& key, float stddev, std::int64_t numel, std::int64_t begin,
                   std::int64_t end, float* out);

// Every parameter of the layout for `seed`, as fp32 in layout order, into out[0, total()),
// on `threads` threads; with rounded, also each value rounded to bf16 into rounded[0, total())
// in the same pass.
void init_weight_values(const ParamLayout& layout, int layers, std::uint64_t seed, float* out,
                        int threads, std::uint16_t* rounded = nullptr);

// A run of one parameter's values: its elements [begin, end) (in the layout `init_weight_runs`
// is given) written to out[dst, dst + end - begin).
struct WeightRun {
  std::size_t param;
  std::int64_t begin, end, dst;
};

// Only the values the runs name, each exactly as init_weight_values gives it (any begin and
// end), on `threads` threads.
void init_weight_runs(const ParamLayout& layout, int layers, std::uint64_t seed,
                      const std::vector<WeightRun>& runs, float* out, int threads);

// Every parameter of the layout as one run each, to its place in layout order.
std::vector<WeightRun> layout_weight_runs(const ParamLayout& layout);
// The parts of `runs` that land in out[lo, lo + n), moved to out[0, n) (a ZeRO shard of them).
std::vector<WeightRun> runs_within(const std::vector<WeightRun>& runs, std::int64_t lo, std::int64_t n);

// The definition the above must match bit for bit: one value pair at a time on one thread,
// a Philox call for every value (for tests and benchmarks).
std::vector<float> reference_weight_values(const ParamLayout& layout, int layers,
                                           std::uint64_t seed);

}  // namespace remat
