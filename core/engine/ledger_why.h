// Why a saved tensor of a run's ledger ended as it did (LedgerEntry::why), in words and figures
// from the block's table: what rebuilding it would run again given what the block held after
// its forward (a weight GEMM, or how many FLOPs of which steps), or what rebuilding it needs on
// its own (tensors rebuilt together share steps: the rows' FLOPs do not add up). The same
// words whatever policy planned the step; for `optimal` and `budget` they are the reasons of
// their cost model (docs/policies.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph/block_graph.h"

namespace remat {

// `held`: per tensor of g, whether the block held it from its forward to its backward (kept,
// checkpointed or offloaded); `block`: the block among g's (for a window's FLOPs). `decision`
// is one of kLedgerDecisions.
std::string ledger_why(const BlockGraph& g, int block, const std::vector<bool>& held, int tensor,
                       const std::string& decision);

// FLOPs in words: "42.2 MFLOP".
std::string flops_in_words(std::uint64_t flops);

}  // namespace remat
