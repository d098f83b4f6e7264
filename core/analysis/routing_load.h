// What a run's mixture-of-experts routing was (Trace::routing, routing.csv): each layer's load
// per micro-batch, and whether a recorded routing belongs to a model (plan --routing-from).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/model_config.h"
#include "core/trace/records.h"

namespace remat {

// One layer of one micro-batch: its choices, those kept, and its most-loaded expert against the
// mean (routed / experts): 1 is balanced, experts / top_k is every token on one expert.
struct LayerLoad {
  int micro_batch = 0, layer = 0;
  int busiest = 0;  // the expert with most choices (the lowest index among equals)
  std::uint64_t most = 0, routed = 0, kept = 0;
  double imbalance = 0.0;
};

// Per (micro-batch, layer) in the records' order; `experts` rows each (as read_run_dir checks).
std::vector<LayerLoad> layer_loads(const std::vector<RoutingRecord>& routing, int experts);

// The highest imbalance a router of `m` can reach: every token's choices include one expert, so
// it holds tokens of tokens·k / experts on average: experts / top_k.
double max_moe_imbalance(const MoeConfig& m);

// Throws Error "WHERE: ..." where a run (of `format_version`, its model `recorded`, `records`
// rows of routing.csv) recorded no routing.
void check_routing_recorded(const ModelConfig& recorded, std::size_t records, int format_version,
                            const std::string& where);
// Throws Error "WHERE: ..." naming the field and both numbers where the routing recorded with
// `recorded` cannot be the routing of `m` (experts, top_k, capacity, layers, the layers with
// experts, the tokens of a micro-batch).
void check_routing_model(const ModelConfig& recorded, const ModelConfig& m, const std::string& where);

}  // namespace remat
