#include "core/analysis/routing_load.h"

#include <algorithm>

#include "core/trace/schema.h"
#include "core/trace/trace.h"
#include "core/util/error.h"

namespace remat {

std::vector<LayerLoad> layer_loads(const std::vector<RoutingRecord>& routing, int experts) {
  std::vector<LayerLoad> out;
  if (experts <= 0) return out;
  for (std::size_t i = 0; i + static_cast<std::size_t>(experts) <= routing.size(); i += static_cast<std::size_t>(experts)) {
    LayerLoad l;
    l.micro_batch = routing[i].micro_batch;
    l.layer = routing[i].layer;
    for (int e = 0; e < experts; ++e) {
      const RoutingRecord& r = routing[i + static_cast<std::size_t>(e)];
      l.routed += r.routed;
      l.kept += r.kept;
      if (r.routed > l.most) l.most = r.routed, l.busiest = e;
    }
    l.imbalance = l.routed == 0 ? 0.0 : static_cast<double>(l.most) * experts / static_cast<double>(l.routed);
    out.push_back(l);
  }
  return out;
}

double max_moe_imbalance(const MoeConfig& m) {
  return m.top_k > 0 ? static_cast<double>(m.experts) / m.top_k : 0.0;
}

namespace {

void differ(const std::string& where, const std::string& field, const std::string& recorded, const std::string& now) {
  throw Error(where + ": the routing was recorded with " + field + " " + recorded + ", the model has " + now +
              " (a recorded routing replays only on the model and layout that recorded it)");
}

void same(const std::string& where, const std::string& field, std::int64_t recorded, std::int64_t now) {
  if (recorded != now) differ(where, field, std::to_string(recorded), std::to_string(now));
}

}  // namespace

void check_routing_recorded(const ModelConfig& recorded, std::size_t records, int format_version,
                            const std::string& where) {
  if (!schema::table(schema::kRoutingFile).in(format_version))
    throw Error(where + ": a run of format version " + std::to_string(format_version) +
                " records no routing (routing.csv is new in version " + std::to_string(schema::table(schema::kRoutingFile).since) +
                "); run the model again with this RematLab");
  if (!recorded.moe.on()) throw Error(where + ": the run's model " + recorded.name + " has no experts");
  if (records == 0)
    throw Error(where + ": the run recorded no routing (routing.csv has no rows: the run stopped before its last "
                        "step, or it was saved again from a run directory of an older version)");
}

void check_routing_model(const ModelConfig& recorded, const ModelConfig& m, const std::string& where) {
  if (!m.moe.on()) throw Error(where + ": the model " + m.name + " has no experts, so there is no routing to replay");
  same(where, "experts", recorded.moe.experts, m.moe.experts);
  same(where, "top_k", recorded.moe.top_k, m.moe.top_k);
  if (recorded.moe.capacity_factor != m.moe.capacity_factor)
    differ(where, "capacity_factor", recorded.moe.capacity_factor > 0 ? std::to_string(recorded.moe.capacity_factor) : "none (dropless)",
           m.moe.capacity_factor > 0 ? std::to_string(m.moe.capacity_factor) : "none (dropless)");
  same(where, "layers", recorded.layers, m.layers);
  for (int b = 0; b < m.layers; ++b)
    if (recorded.moe_in(b) != m.moe_in(b))
      differ(where, "layer " + std::to_string(b), recorded.moe_in(b) ? "with experts" : "dense",
             m.moe_in(b) ? "it with experts" : "it dense");
  same(where, "tokens per micro-batch (seq x batch)", recorded.tokens(), m.tokens());
}

}  // namespace remat
