// The names the views give blocks. A pipeline stage's rank records its blocks by their index in
// the stage (0 .. stage_blocks - 1, so its files validate against the stage's own block table),
// while its user thinks of the whole model: stage 1 of a 4-block model holds h2 and h3. Here
// the stage's blocks are named by the whole model's index (provenance `stage_first_block`, or
// for older directories: the last stage ends at the model's last block, the others hold equal
// shares), and op names that begin with a stage's block ("h0.attn.qkv") are renamed alike.
#pragma once
#include <cstdint>
#include <string>

#include "core/trace/trace.h"

namespace remat {

// The whole model's index of the trace's block 0: 0 for anything but a pipeline stage's rank.
int first_block(const Trace& t);
// Blocks the trace holds: a stage's blocks, else the model's layers.
int held_blocks(const Trace& t);
// "h3" for the trace's block `block` (offset by first_block); "" for block < 0.
std::string block_name(int first, std::int32_t block);
// `name` with a leading "h<block>." renamed to the whole model's block (unchanged when `first`
// is 0 or the name does not begin with a block).
std::string global_op_name(int first, const std::string& name);

}  // namespace remat
