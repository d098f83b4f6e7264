// What a schedule does to each block, in words, with consecutive blocks that do the same put
// together: for `plan`'s summary of a plan (which blocks keep what, which recompute or rebuild
// what inside their backward).
#pragma once
#include <string>
#include <vector>

#include "core/schedule/schedule.h"

namespace remat {

struct BlockActions {
  int first = 0, last = 0;  // the blocks, first..last
  std::string actions;      // e.g. "forward keep=block.in,attn.qkv; backward rebuilding ln1.out"
};

// The blocks of `s` in order, grouped where consecutive blocks' actions read the same.
std::vector<BlockActions> block_actions(const Schedule& s);

}  // namespace remat
