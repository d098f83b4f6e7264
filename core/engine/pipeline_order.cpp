#include "core/engine/pipeline_order.h"

#include <algorithm>
#include <string>

#include "core/util/error.h"

namespace remat {

std::vector<PipelineItem> pipeline_order(int stages, int stage, int micro_batches) {
  if (stages < 1 || stage < 0 || stage >= stages || micro_batches < 1)
    throw Error("1F1B order of stage " + std::to_string(stage) + " of " + std::to_string(stages) +
                " with " + std::to_string(micro_batches) + " micro-batches");
  const int warmup = std::min(stages - stage - 1, micro_batches);
  std::vector<PipelineItem> order;
  int f = 0, b = 0;
  for (; f < warmup; ++f) order.push_back({true, f});
  while (f < micro_batches) {
    order.push_back({true, f++});
    order.push_back({false, b++});
  }
  while (b < micro_batches) order.push_back({false, b++});
  return order;
}

int in_flight(const std::vector<PipelineItem>& order) {
  int live = 0, most = 0;
  for (const PipelineItem& i : order) {
    live += i.forward ? 1 : -1;
    most = std::max(most, live);
  }
  return most;
}

}  // namespace remat
