#include "core/analysis/slice_tree.h"

#include <algorithm>
#include <numeric>

#include "core/analysis/block_names.h"

namespace remat {

const char* to_string(SliceLevel l) {
  switch (l) {
    case SliceLevel::Step: return "step";
    case SliceLevel::Phase: return "phase";
    case SliceLevel::Block: return "block";
    case SliceLevel::Op: return "op";
    case SliceLevel::Kernel: return "kernel";
  }
  return "?";
}

namespace {

// Groups consecutive ops [0, n) of one stream into slices: a new slice starts where `same`
// says an op does not continue the previous one, or where the parent slice changes.
template <class Same>
void group(const Trace& t, const std::vector<std::uint32_t>& order, const SliceTrack* parent,
           SliceTrack& out, Same same) {
  const std::uint32_t n = static_cast<std::uint32_t>(order.size());
  std::uint32_t p = 0;
  for (std::uint32_t i = 0; i < n;) {
    while (parent && p + 1 < parent->slices.size() && parent->slices[p].last <= i) ++p;
    const std::uint32_t end_of_parent = parent ? parent->slices[p].last : n;
    const OpRecord& a = t.ops[order[i]];
    std::uint32_t j = i + 1;
    while (j < end_of_parent && same(a, t.ops[order[j]])) ++j;
    Slice s;
    s.first = i;
    s.last = j;
    s.start = a.start_ns;
    s.end = a.end_ns;
    for (std::uint32_t k = i; k < j; ++k) {
      s.start = std::min(s.start, t.ops[order[k]].start_ns);
      s.end = std::max(s.end, t.ops[order[k]].end_ns);
    }
    s.parent = parent ? p : Slice::kNone;
    s.phase = a.phase;
    s.block = a.block;
    s.step = a.step;
    out.slices.push_back(s);
    i = j;
  }
}

}  // namespace

SliceTree::SliceTree(const Trace& t) {
  kernels_ = t.device == "cuda";
  first_block_ = remat::first_block(t);
  pos_.assign(t.ops.size(), 0);
  for (std::uint32_t i = 0; i < t.ops.size(); ++i) by_stream_[static_cast<int>(t.ops[i].stream)].push_back(i);
  for (auto& v : by_stream_) {
    auto by_start = [&](std::uint32_t a, std::uint32_t b) { return t.ops[a].start_ns < t.ops[b].start_ns; };
    if (!std::is_sorted(v.begin(), v.end(), by_start)) std::stable_sort(v.begin(), v.end(), by_start);
    for (std::uint32_t k = 0; k < v.size(); ++k) pos_[v[k]] = k;
  }
  const auto& compute = by_stream_[0];
  if (!compute.empty()) {
    SliceTrack step{Stream::Compute, SliceLevel::Step, {}};
    group(t, compute, nullptr, step, [](const OpRecord& a, const OpRecord& b) { return a.step == b.step; });
    // A step is as long as the step figures say (it holds host work before and after its ops).
    for (Slice& s : step.slices)
      for (const StepStats& st : t.step_stats)
        if (st.step == s.step && st.end_ns > st.start_ns) {
          s.start = std::min(s.start, st.start_ns);
          s.end = std::max(s.end, st.end_ns);
        }
    tracks_.push_back(std::move(step));
    SliceTrack phase{Stream::Compute, SliceLevel::Phase, {}};
    group(t, compute, &tracks_.back(), phase, [](const OpRecord& a, const OpRecord& b) { return a.phase == b.phase; });
    tracks_.push_back(std::move(phase));
    // Block slices only for ops inside a block; the parent is the phase.
    SliceTrack blocks{Stream::Compute, SliceLevel::Block, {}};
    SliceTrack all{Stream::Compute, SliceLevel::Block, {}};
    group(t, compute, &tracks_.back(), all, [](const OpRecord& a, const OpRecord& b) { return a.block == b.block; });
    for (const Slice& s : all.slices)
      if (s.block >= 0) blocks.slices.push_back(s);
    const int phase_track = static_cast<int>(tracks_.size()) - 1;
    tracks_.push_back(std::move(blocks));
    SliceTrack ops{Stream::Compute, SliceLevel::Op, {}};
    if (kernels_)
      group(t, compute, &tracks_[static_cast<std::size_t>(phase_track)], ops,
            [](const OpRecord& a, const OpRecord& b) { return a.op_id == b.op_id && a.block == b.block; });
    else
      group(t, compute, &tracks_[static_cast<std::size_t>(phase_track)], ops, [](const OpRecord&, const OpRecord&) { return false; });
    tracks_.push_back(std::move(ops));
    if (kernels_) {
      SliceTrack k{Stream::Compute, SliceLevel::Kernel, {}};
      group(t, compute, &tracks_.back(), k, [](const OpRecord&, const OpRecord&) { return false; });
      tracks_.push_back(std::move(k));
    }
  }
  for (int s = 1; s < kNumStreams; ++s) {
    if (by_stream_[s].empty()) continue;
    SliceTrack tr{static_cast<Stream>(s), kernels_ ? SliceLevel::Kernel : SliceLevel::Op, {}};
    group(t, by_stream_[s], nullptr, tr, [](const OpRecord&, const OpRecord&) { return false; });
    nest(t, std::move(tr));
  }
}

void SliceTree::nest(const Trace& t, SliceTrack all) {
  const auto& order = by_stream_[static_cast<int>(all.stream)];
  std::vector<std::uint32_t> depth(order.size(), 0), open;
  std::uint32_t levels = 1;
  for (std::uint32_t k = 0; k < order.size(); ++k) {
    const OpRecord& o = t.ops[order[k]];
    while (!open.empty()) {
      const OpRecord& p = t.ops[order[open.back()]];
      if (nests_in(p.start_ns, p.end_ns, o.start_ns, o.end_ns)) break;
      open.pop_back();
    }
    depth[k] = static_cast<std::uint32_t>(open.size());
    levels = std::max(levels, depth[k] + 1);
    open.push_back(k);
  }
  if (levels == 1) {
    tracks_.push_back(std::move(all));
    return;
  }
  if (nested_leaf_.empty()) nested_leaf_.assign(t.ops.size(), {-1, -1});
  const std::size_t first = tracks_.size();
  for (std::uint32_t d = 0; d < levels; ++d) tracks_.push_back(SliceTrack{all.stream, all.level, {}, d});
  for (std::uint32_t k = 0; k < order.size(); ++k) {  // `all` holds one slice per op, in order
    SliceTrack& tr = tracks_[first + depth[k]];
    nested_leaf_[order[k]] = {static_cast<int>(first + depth[k]), static_cast<int>(tr.slices.size())};
    tr.slices.push_back(all.slices[k]);
  }
}

int SliceTree::leaf_track(Stream s) const {
  int found = -1;
  for (std::size_t i = 0; i < tracks_.size(); ++i)
    if (tracks_[i].stream == s) found = static_cast<int>(i);  // the deepest level comes last
  return found;
}

std::pair<int, int> SliceTree::leaf_of(std::uint32_t op) const {
  if (op >= pos_.size()) return {-1, -1};
  if (op < nested_leaf_.size() && nested_leaf_[op].first >= 0) return nested_leaf_[op];
  // Leaf tracks hold one slice per op, in the stream's order.
  for (int s = 0; s < kNumStreams; ++s) {
    const auto& v = by_stream_[s];
    const std::uint32_t p = pos_[op];
    if (p < v.size() && v[p] == op) return {leaf_track(static_cast<Stream>(s)), static_cast<int>(p)};
  }
  return {-1, -1};
}

SpanRows SliceTree::span_rows() const {
  std::vector<std::vector<Span>> rows(tracks_.size());
  for (std::size_t r = 0; r < tracks_.size(); ++r) {
    rows[r].reserve(tracks_[r].slices.size());
    for (std::size_t i = 0; i < tracks_[r].slices.size(); ++i) {
      const Slice& s = tracks_[r].slices[i];
      const int color = tracks_[r].level == SliceLevel::Step ? kNumPhases : static_cast<int>(s.phase);
      rows[r].push_back({s.start, s.end, static_cast<std::uint32_t>(i), static_cast<std::uint8_t>(color)});
    }
  }
  return SpanRows(std::move(rows));
}

std::string SliceTree::name(const Trace& t, int track, int slice) const {
  if (track < 0 || static_cast<std::size_t>(track) >= tracks_.size()) return {};
  const SliceTrack& tr = tracks_[static_cast<std::size_t>(track)];
  if (slice < 0 || static_cast<std::size_t>(slice) >= tr.slices.size()) return {};
  const Slice& s = tr.slices[static_cast<std::size_t>(slice)];
  const OpRecord& o = t.ops[stream_ops(tr.stream)[s.first]];
  switch (tr.level) {
    case SliceLevel::Step: return "step " + std::to_string(s.step);
    case SliceLevel::Phase: return to_string(s.phase);
    case SliceLevel::Block: return "block " + std::to_string(s.block + first_block_);
    case SliceLevel::Op:
      if (kernels_ && tr.stream == Stream::Compute)
        return o.block >= 0 ? block_name(first_block_, o.block) + "." + o.op : o.op;
      return global_op_name(first_block_, o.name);
    case SliceLevel::Kernel: return o.name;
  }
  return {};
}

std::uint64_t SliceTree::flops(const Trace& t, int track, int slice) const {
  const SliceTrack& tr = tracks_[static_cast<std::size_t>(track)];
  const Slice& s = tr.slices[static_cast<std::size_t>(slice)];
  std::uint64_t sum = 0;
  for (std::uint32_t k = s.first; k < s.last; ++k) sum += t.ops[stream_ops(tr.stream)[k]].flops;
  return sum;
}

std::uint64_t SliceTree::bytes(const Trace& t, int track, int slice) const {
  const SliceTrack& tr = tracks_[static_cast<std::size_t>(track)];
  const Slice& s = tr.slices[static_cast<std::size_t>(slice)];
  std::uint64_t sum = 0;
  for (std::uint32_t k = s.first; k < s.last; ++k) sum += t.ops[stream_ops(tr.stream)[k]].bytes;
  return sum;
}

OpMemoryIndex::OpMemoryIndex(const Trace& t) {
  const std::size_t lo = std::min(t.step_first_event, t.events.size());
  const std::size_t hi = t.step_end_event > lo ? std::min(t.step_end_event, t.events.size()) : t.events.size();
  std::vector<std::size_t> idx(hi - lo);
  std::iota(idx.begin(), idx.end(), lo);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return t.events[a].op_seq < t.events[b].op_seq; });
  ids_.reserve(idx.size());
  prefix_.reserve(idx.size() + 1);
  prefix_.push_back({});
  for (std::size_t i : idx) {
    const MemoryEvent& e = t.events[i];
    OpMemory m = prefix_.back();
    if (e.delta > 0) {
      m.allocated += static_cast<std::uint64_t>(e.delta);
      ++m.allocations;
    } else if (e.delta < 0) {
      m.freed += static_cast<std::uint64_t>(-e.delta);
      ++m.frees;
    }
    ids_.push_back(e.op_seq);
    prefix_.push_back(m);
  }
}

OpMemory OpMemoryIndex::between(std::uint64_t first_op_id, std::uint64_t last_op_id) const {
  if (last_op_id < first_op_id || prefix_.empty()) return {};
  const std::size_t a = static_cast<std::size_t>(std::lower_bound(ids_.begin(), ids_.end(), first_op_id) - ids_.begin());
  const std::size_t b = static_cast<std::size_t>(std::upper_bound(ids_.begin(), ids_.end(), last_op_id) - ids_.begin());
  const OpMemory& x = prefix_[a];
  const OpMemory& y = prefix_[b];
  return {y.allocated - x.allocated, y.freed - x.freed, y.allocations - x.allocations, y.frees - x.frees};
}

}  // namespace remat
