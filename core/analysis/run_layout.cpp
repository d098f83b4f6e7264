#include "core/analysis/run_layout.h"

#include <algorithm>

namespace remat {

RunLayout run_layout(const Trace& t) {
  RunLayout l;
  l.tp = std::max(1, provenance_int(t, "tp_world_size", provenance_int(t, "tp", 1)));
  l.dp = std::max(1, provenance_int(t, "dp_world_size", provenance_int(t, "dp", 1)));
  l.pp = std::max(1, provenance_int(t, "pp_world_size", 1));
  l.zero = provenance_int(t, "zero", 0);
  if (!l.distributed()) return l;
  const int tp_rank = provenance_int(t, "tp_rank", 0), dp_rank = provenance_int(t, "dp_rank", 0);
  const int pp_rank = provenance_int(t, "pp_rank", 0);
  l.rank = provenance_int(t, "rank", (pp_rank * l.dp + dp_rank) * l.tp + tp_rank);
  l.distributed_checkpoints = provenance_int(t, "distribute_saved_activations", 0) == 1;
  const int sp = provenance_int(t, "sp", -1);
  if (sp >= 0) {
    l.sp = sp == 1;
  } else if (l.tp > 1) {
    for (const auto& o : t.ops)
      if (o.stream == Stream::Comm && o.op == "reduce_scatter" && o.block >= 0 &&
          o.ranks.size() == static_cast<std::size_t>(l.tp)) {
        l.sp = true;
        break;
      }
  }
  return l;
}

std::string layout_label(const RunLayout& l) {
  if (!l.distributed()) return "1 rank";
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  if (l.pp > 1) add("pp " + std::to_string(l.pp));
  if (l.tp > 1) add("tp " + std::to_string(l.tp) + (l.sp ? " sp" : "") + (l.distributed_checkpoints ? " distributed ckpt" : ""));
  if (l.dp > 1) add("dp " + std::to_string(l.dp));
  if (l.zero > 0) add("zero " + std::to_string(l.zero));
  return s;
}

std::string rank_label(const RunLayout& l) {
  if (!l.distributed()) return {};
  return layout_label(l) + ", rank " + std::to_string(l.rank);
}

ModelConfig global_model(const Trace& t) {
  ModelConfig m = t.model;
  m.batch *= run_layout(t).dp;
  return m;
}

}  // namespace remat
