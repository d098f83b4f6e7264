#include "core/analysis/peak_alive.h"

#include <algorithm>
#include <unordered_map>

#include "core/analysis/block_names.h"
#include "core/analysis/live_tensors.h"
#include "core/analysis/memory_timeline.h"

namespace remat {

namespace {

// Why an allocation is alive at the peak: from the ledger's decision for a saved tensor, else
// from what its category holds.
std::string why_alive(const Allocation& a, const LedgerEntry* l, const std::string& block, const PeakAlive& p) {
  const std::string of_block = block.empty() ? std::string() : " of " + block;
  if (l) {
    if (l->decision == "kept") return "saved in the forward for the backward" + of_block + " (the policy keeps it)";
    if (l->decision == "checkpoint") return "a checkpoint: kept to recompute" + (block.empty() ? std::string(" from") : " " + block + " from");
    if (l->decision == "recomputed") return "recomputed for the backward" + of_block;
    if (l->decision == "offloaded") return "offloaded: on the device until its copy to the host ends";
    if (l->decision == "discarded") return "saved until the policy drops it (recomputed later)";
  }
  const std::string running = p.op.empty() ? std::string() : " (" + p.op + " runs at the peak)";
  switch (a.category) {
    case Category::Parameters: return "the model's weights: alive for the whole run";
    case Category::Gradients: return "the weights' gradients: accumulated until the optimizer step";
    case Category::MasterWeights: return "fp32 master weights: alive for the whole run";
    case Category::OptimizerState: return "the optimizer's state: alive for the whole run";
    case Category::SavedActivations: return "saved in the forward for the backward" + of_block;
    case Category::Checkpoints: return "a checkpoint: kept to recompute" + of_block + " from";
    case Category::RecomputeTemps: return "recomputed for the backward" + of_block;
    case Category::ActivationGrads: return "an activation's gradient, flowing back" + running;
    case Category::LogitsLoss: return "the logits and loss, until their backward";
    case Category::Workspace:
      if (a.phase == Phase::Init) return "the executor's workspace: allocated once, before the first step";
      return "a temporary of the op it belongs to" + running;
    case Category::HostOffloaded: return "on the host";
    case Category::Unknown: case Category::Count: break;
  }
  return "allocated and not yet freed (the trace does not say what for)";
}

}  // namespace

PeakAlive peak_alive(const Trace& t) {
  PeakAlive p;
  const MemoryTimeline mt = memory_timeline(t);
  if (mt.points.empty()) return p;
  const TimelinePoint& pt = mt.points[mt.peak_point];
  p.found = true;
  p.t_ns = pt.t_ns;
  p.event = pt.event;
  p.peak_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(pt.device, 0));
  // The op the peak's event belongs to (its op_seq: the op running, or about to begin), else the
  // compute op running at that time.
  const std::uint64_t seq = pt.event >= 0 ? t.events[static_cast<std::size_t>(pt.event)].op_seq : 0;
  for (const OpRecord& o : t.ops) {
    const bool by_seq = seq != 0 && o.op_id == seq;
    if (o.stream == Stream::Compute && (by_seq || (p.op.empty() && o.start_ns <= p.t_ns && p.t_ns < o.end_ns))) {
      p.op = o.name;
      p.phase = o.phase;
      if (by_seq) break;
    }
  }
  const int first = first_block(t);
  if (!p.op.empty()) p.op = global_op_name(first, p.op);

  std::unordered_map<std::uint64_t, const LedgerEntry*> ledger;
  for (const LedgerEntry& l : t.ledger) {
    ledger[l.alloc_id] = &l;
    ledger[l.free_id] = &l;
  }
  // Alive right after the peak's event; at the baseline point, alive when the range begins.
  const std::size_t begin = mt.range.first;
  auto alive = [&](const Allocation& a) {
    if (pt.event >= 0) {
      const auto e = static_cast<std::size_t>(pt.event);
      return a.alloc_event <= e && e < a.free_event;
    }
    return a.alloc_event < begin && begin <= a.free_event;
  };
  for (const Allocation& a : allocations(t)) {
    if (a.space != Space::Device || !alive(a)) continue;
    PeakTensor x;
    x.label = global_op_name(first, allocation_label(a, t.names));
    x.bytes = a.bytes;
    x.id = a.id;
    x.category = a.category;
    x.block = a.block;
    x.phase = a.phase;
    x.alloc_ns = t.events[a.alloc_event].t_ns;
    x.free_ns = a.free_event < t.events.size() ? t.events[a.free_event].t_ns : -1;
    const auto l = ledger.find(a.id);
    x.why = why_alive(a, l == ledger.end() ? nullptr : l->second, block_name(first, a.block), p);
    p.sum_bytes += a.bytes;
    p.tensors.push_back(std::move(x));
  }
  std::stable_sort(p.tensors.begin(), p.tensors.end(),
                   [](const PeakTensor& a, const PeakTensor& b) { return a.bytes > b.bytes; });
  return p;
}

}  // namespace remat
