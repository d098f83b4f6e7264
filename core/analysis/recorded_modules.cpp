#include "core/analysis/recorded_modules.h"

#include <unordered_map>
#include <unordered_set>

namespace remat {

std::vector<ModuleSavedBytes> saved_bytes_per_module(const RecordedRun& run) {
  std::vector<ModuleSavedBytes> out;
  std::unordered_map<std::string, std::size_t> row;
  std::unordered_set<std::uint64_t> counted;
  for (const RecordedTensor& t : run.tensors) {
    if (t.parameter || !t.held_at_backward) continue;
    auto [it, fresh] = row.try_emplace(t.module, out.size());
    if (fresh) out.push_back({t.module, t.block, 0, 0});
    ModuleSavedBytes& m = out[it->second];
    ++m.tensors;
    if (counted.insert(t.storage).second) m.bytes += t.storage_bytes;
  }
  return out;
}

}  // namespace remat
