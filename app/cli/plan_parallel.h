// rematlab-batch plan over ranks: --tp/--sp/--pp/--dp/--zero and friends predict one rank's
// peak per pipeline stage; --strategies and --paper-figure7 print the first stage's activations
// under Korthikanti et al.'s five strategies.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "cli_common.h"
#include "core/graph/parallel_layout.h"
#include "plan_target.h"

namespace remat::cli {

// The most tensor-parallel ranks, replicas or micro-batches plan takes, and the most sequences a
// step over all replicas may have.
inline constexpr int kMaxParallel = 1 << 20;
inline constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 40;

struct ParallelOptions {
  ParallelLayout layout;
  bool strategies = false;
  bool paper_figure7 = false;
  void add(CLI::App& app);
  // Any option that asks for a per-rank prediction.
  bool any() const;
};

// `plan` with a layout: per-rank peak and its breakdown, text or JSON.
// `target` is the backend whose sizes the prediction takes (plan_target.h).
int plan_parallel(const ModelConfig& m, const ParallelLayout& p, const PolicyOptions& policy,
                  const TargetOptions& target_options, const Backend& target, bool json);
// `plan --strategies` for one model and layout, or `--paper-figure7` for the four Table 3 models.
int plan_strategies(const ModelConfig& m, const ParallelLayout& p, bool json);
int plan_paper_figure7(bool json);

}  // namespace remat::cli
