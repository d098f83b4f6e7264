#include "core/memory/tracking_allocator.h"

#include "core/util/error.h"

namespace remat {

TrackingAllocator::TrackingAllocator(MemoryResource& device, MemoryResource& host, Clock& clock)
    : device_(device), host_(host), clock_(clock) {
  intern("");
}

TrackingAllocator::~TrackingAllocator() {
  release_quarantine();
  for (auto& [id, l] : allocs_) resource(l.space).deallocate(l.data, l.bytes);
}

std::uint32_t TrackingAllocator::intern(const std::string& name) {
  auto it = name_ids_.find(name);
  if (it != name_ids_.end()) return it->second;
  auto id = static_cast<std::uint32_t>(names_.size());
  names_.push_back(name);
  name_ids_.emplace(name, id);
  return id;
}

void TrackingAllocator::record(std::int64_t delta, std::uint64_t id, const Live& l) {
  MemoryEvent e;
  e.t_ns = clock_.now_ns();
  e.delta = delta;
  e.id = id;
  e.category = l.category;
  e.phase = phase_;
  e.space = l.space;
  e.block = l.block;
  e.tensor = l.tensor;
  e.step = step_;
  e.reserved = device_.reserved_bytes();
  e.op_seq = op_seq_;
  events_.push_back(e);
}

Tensor TrackingAllocator::allocate(DType dtype, std::int64_t numel, const AllocTag& tag,
                                   Space space) {
  if (numel <= 0) throw Error("allocation of " + std::to_string(numel) + " elements for '" +
                              tag.tensor + "'");
  std::uint64_t bytes = static_cast<std::uint64_t>(numel) * dtype_size(dtype);
  if (space == Space::Device && limit_ > 0 && total_[0] + bytes > limit_)
    throw OutOfMemoryError("device memory limit reached allocating '" + tag.tensor + "' (" +
                               std::to_string(bytes) + " bytes)",
                           total_[0] + bytes, limit_);
  void* p = resource(space).allocate(bytes);
  Live l{bytes, tag.category, space, tag.block, intern(tag.tensor), p};
  std::uint64_t id = next_id_++;
  allocs_.emplace(id, l);
  live_[idx(space)][static_cast<int>(tag.category)] += bytes;
  total_[idx(space)] += bytes;
  record(static_cast<std::int64_t>(bytes), id, l);
  if (space == Space::Device && total_[0] > peak_) {
    peak_ = total_[0];
    peak_event_ = events_.size() - 1;
  }
  if (space == Space::Device && total_[0] > peak_all_) peak_all_ = total_[0];
  Tensor t;
  t.data = p;
  t.dtype = dtype;
  t.numel = numel;
  t.id = id;
  t.space = space;
  return t;
}

void TrackingAllocator::free(Tensor& t) {
  if (t.id == 0) throw Error("free of an untracked tensor");
  auto it = allocs_.find(t.id);
  if (it == allocs_.end()) throw Error("double free of allocation " + std::to_string(t.id));
  Live l = it->second;
  allocs_.erase(it);
  live_[idx(l.space)][static_cast<int>(l.category)] -= l.bytes;
  total_[idx(l.space)] -= l.bytes;
  if (poison_ && resource(l.space).backs_memory()) {
    resource(l.space).poison(l.data, l.bytes);
    quarantine_.push_back({l.data, {l.bytes, l.space}});
  } else {
    resource(l.space).deallocate(l.data, l.bytes);
  }
  record(-static_cast<std::int64_t>(l.bytes), t.id, l);
  t = Tensor{};
}

void TrackingAllocator::retag(const Tensor& t, Category category) {
  auto it = allocs_.find(t.id);
  if (it == allocs_.end()) throw Error("retag of an unknown allocation");
  Live& l = it->second;
  if (l.category == category) return;
  record(-static_cast<std::int64_t>(l.bytes), t.id, l);
  live_[idx(l.space)][static_cast<int>(l.category)] -= l.bytes;
  l.category = category;
  live_[idx(l.space)][static_cast<int>(l.category)] += l.bytes;
  record(static_cast<std::int64_t>(l.bytes), t.id, l);
}

void TrackingAllocator::release_quarantine() {
  for (auto& [p, sz] : quarantine_) resource(sz.second).deallocate(p, sz.first);
  quarantine_.clear();
}

void TrackingAllocator::reset_peak() {
  peak_ = total_[0];
  peak_event_ = events_.empty() ? 0 : events_.size() - 1;
}

}  // namespace remat
