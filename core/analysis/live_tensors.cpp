#include "core/analysis/live_tensors.h"

#include <algorithm>
#include <unordered_map>

namespace remat {

std::vector<Allocation> allocations(const Trace& t) {
  std::vector<Allocation> out;
  std::unordered_map<std::uint64_t, std::size_t> open;  // allocation id -> index in out
  const std::size_t n = t.events.size();
  for (std::size_t i = 0; i < n; ++i) {
    const MemoryEvent& e = t.events[i];
    if (e.delta > 0) {
      Allocation a;
      a.alloc_event = i;
      a.free_event = n;
      a.bytes = static_cast<std::uint64_t>(e.delta);
      a.id = e.id;
      a.category = e.category;
      a.space = e.space;
      a.phase = e.phase;
      a.block = e.block;
      a.tensor = e.tensor;
      open[e.id] = out.size();
      out.push_back(a);
    } else if (e.delta < 0) {
      auto it = open.find(e.id);
      if (it == open.end()) continue;
      out[it->second].free_event = i;
      open.erase(it);
    }
  }
  return out;
}

std::string allocation_label(const Allocation& a, const std::vector<std::string>& names) {
  std::string nm = a.tensor < names.size() ? names[a.tensor] : std::string();
  if (nm.empty()) nm = to_string(a.category);
  return block_qualified(a.block, nm);
}

LiveTensorIndex::LiveTensorIndex(const Trace& t) : by_size_(allocations(t)), names_(t.names) {
  std::stable_sort(by_size_.begin(), by_size_.end(),
                   [](const Allocation& a, const Allocation& b) { return a.bytes > b.bytes; });
}

std::vector<const Allocation*> LiveTensorIndex::largest_at(std::size_t event, std::size_t n) const {
  return largest_at(event, n, [](const Allocation&) { return true; });
}

std::vector<const Allocation*> LiveTensorIndex::largest_at(std::size_t event, std::size_t n,
                                                           const std::function<bool(const Allocation&)>& keep) const {
  std::vector<const Allocation*> out;
  for (const auto& a : by_size_) {
    if (out.size() >= n) break;
    if (a.alloc_event <= event && event < a.free_event && keep(a)) out.push_back(&a);
  }
  return out;
}

const std::string& LiveTensorIndex::tensor_name(const Allocation& a) const {
  static const std::string empty;
  return a.tensor < names_.size() ? names_[a.tensor] : empty;
}

std::string LiveTensorIndex::label(const Allocation& a) const { return allocation_label(a, names_); }

std::string block_qualified(std::int32_t block, const std::string& name) {
  return block >= 0 ? "h" + std::to_string(block) + "." + name : name;
}

}  // namespace remat
