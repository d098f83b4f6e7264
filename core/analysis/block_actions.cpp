#include "core/analysis/block_actions.h"

#include <algorithm>

namespace remat {

std::vector<BlockActions> block_actions(const Schedule& s) {
  std::vector<std::string> text(static_cast<std::size_t>(std::max(s.blocks, 0)));
  for (const Action& a : s.actions) {
    if (a.block < 0 || a.block >= s.blocks) continue;
    std::string part = to_string(a.kind);
    const bool plain = a.keep.kind == KeepKind::All;
    if (a.kind == ActionKind::Backward) {
      if (a.keep.kind == KeepKind::Named && a.keep.names && !a.keep.names->empty()) part += " rebuilding " + a.keep.to_string();
    } else if (a.kind == ActionKind::Forward || a.kind == ActionKind::Recompute) {
      part += " keep=" + a.keep.to_string();
    } else if (!plain) {
      part += " " + a.keep.to_string();
    }
    std::string& t = text[static_cast<std::size_t>(a.block)];
    t += (t.empty() ? "" : "; ") + part;
  }
  std::vector<BlockActions> out;
  for (int b = 0; b < s.blocks; ++b) {
    const std::string& t = text[static_cast<std::size_t>(b)];
    if (!out.empty() && out.back().actions == t) out.back().last = b;
    else out.push_back({b, b, t});
  }
  return out;
}

}  // namespace remat
