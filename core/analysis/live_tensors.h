// Which tensors are alive at a moment of a run: the allocations of the memory events as
// intervals, for the memory timeline's hover ("the largest tensors alive now") and for
// selecting those tensors in the ledger.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace remat {

struct Allocation {
  std::size_t alloc_event = 0;  // index into Trace::events of the allocation
  std::size_t free_event = 0;   // ... and of its free (events.size() when never freed)
  std::uint64_t bytes = 0;
  std::uint64_t id = 0;
  Category category = Category::Workspace;
  Space space = Space::Device;
  Phase phase = Phase::Init;  // of the allocation
  std::int32_t block = -1;
  std::uint32_t tensor = 0;  // index into Trace::names
};

// A tensor or op of block `block` as the trace names it: "h3.attn.probs"; `name` itself outside
// the blocks (block < 0).
std::string block_qualified(std::int32_t block, const std::string& name);
// Every allocation of the run paired with its free (by allocation id), in allocation order.
std::vector<Allocation> allocations(const Trace& t);
// "h3.attn.probs" (block-qualified like the trace's peak tensors) or the category's name when
// the tensor has none.
std::string allocation_label(const Allocation& a, const std::vector<std::string>& names);

class LiveTensorIndex {
 public:
  LiveTensorIndex() = default;
  explicit LiveTensorIndex(const Trace& t);

  // The `n` largest allocations alive right after event `event` (largest first).
  std::vector<const Allocation*> largest_at(std::size_t event, std::size_t n) const;
  // ... among those `keep` accepts.
  std::vector<const Allocation*> largest_at(std::size_t event, std::size_t n,
                                            const std::function<bool(const Allocation&)>& keep) const;
  // "h3.attn.probs" (block-qualified like the trace's peak tensors) or "parameters".
  std::string label(const Allocation& a) const;
  const std::string& tensor_name(const Allocation& a) const;
  std::size_t size() const { return by_size_.size(); }

 private:
  std::vector<Allocation> by_size_;  // largest first
  std::vector<std::string> names_;
};

}  // namespace remat
