#include "core/analysis/block_names.h"

#include <algorithm>
#include <charconv>

namespace remat {

int held_blocks(const Trace& t) {
  if (provenance_int(t, "pp_world_size", 1) <= 1) return std::max(t.model.layers, 0);
  const int b = provenance_int(t, "stage_blocks", 0);
  return b >= 1 && b <= t.model.layers ? b : std::max(t.model.layers, 0);
}

int first_block(const Trace& t) {
  const int pp = provenance_int(t, "pp_world_size", 1);
  if (pp <= 1) return 0;
  const int blocks = held_blocks(t), layers = std::max(t.model.layers, 0);
  const int recorded = provenance_int(t, "stage_first_block", -1);
  if (recorded >= 0) return std::min(recorded, std::max(0, layers - blocks));
  const int stage = std::clamp(provenance_int(t, "pp_rank", 0), 0, pp - 1);
  if (stage == pp - 1) return std::max(0, layers - blocks);
  return std::min(stage * blocks, std::max(0, layers - blocks));
}

std::string block_name(int first, std::int32_t block) {
  return block >= 0 ? "h" + std::to_string(static_cast<std::int64_t>(block) + first) : std::string();
}

std::string global_op_name(int first, const std::string& name) {
  if (first == 0 || name.size() < 3 || name[0] != 'h') return name;
  const std::size_t dot = name.find('.');
  if (dot == std::string::npos || dot < 2) return name;
  int b = 0;
  const auto [end, ec] = std::from_chars(name.data() + 1, name.data() + dot, b);
  if (ec != std::errc() || end != name.data() + dot || b < 0) return name;
  return block_name(first, b) + name.substr(dot);
}

}  // namespace remat
