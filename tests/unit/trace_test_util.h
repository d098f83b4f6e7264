// Run directories for tests: a temporary directory, file helpers, a synthetic trace with every
// kind of record that is a consistent run, and the message read_run_dir refuses a directory with.
#pragma once
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "core/graph/block_graph.h"
#include "core/schedule/validator.h"
#include "core/trace/run_dir.h"
#include "core/util/error.h"
#include "test_files.h"

namespace remat::testing {

namespace fs = std::filesystem;

// ------------------------------------------------------------------ synthetic traces

// A trace with every kind of record: `steps` steps, each allocating and freeing activations
// around a static set, ops on two streams, and names that need quoting.
inline Trace synthetic_trace(int steps, int per_step, std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  Trace t;
  t.model.name = "synthetic";
  t.model.layers = 4;
  t.policy = "none";
  t.policy_params = "a=1,b=2";
  t.schedule = store_all_schedule(t.model.layers);
  t.schedule.policy = "none";
  t.device = "cpu";
  t.seed = 7;
  t.warmup = 1;
  t.steps = steps - 1;
  t.provenance = {{"blas", "OpenBLAS \"x\", y"}, {"threads", "2"}};
  std::int64_t now = 1000;
  std::uint64_t id = 1;
  t.names = {"params", "h.mlp.fc,out", "attn \"probs\"", "workspace"};
  auto ev = [&](std::int64_t delta, Category c, Space s, std::int32_t block, std::uint32_t tensor,
                std::int32_t step, Phase ph, std::uint64_t eid) {
    MemoryEvent e;
    e.t_ns = now;
    now += 1 + static_cast<std::int64_t>(rng() % 3);
    e.delta = delta;
    e.id = eid;
    e.category = c;
    e.space = s;
    e.block = block;
    e.tensor = tensor;
    e.step = step;
    e.phase = ph;
    e.reserved = static_cast<std::uint64_t>(rng() % 100000);
    e.op_seq = rng() % 1000;
    t.events.push_back(e);
  };
  ev(4096, Category::Parameters, Space::Device, -1, 0, -1, Phase::Init, id++);
  ev(1024, Category::Workspace, Space::Device, -1, 3, -1, Phase::Init, id++);
  std::uint64_t peak = 0;
  for (int s = 0; s < steps; ++s) {
    if (s == steps - 1) t.step_first_event = t.events.size();
    std::int64_t start = now;
    std::int64_t live = 5120;
    std::uint64_t step_peak = static_cast<std::uint64_t>(live);
    std::vector<std::pair<std::uint64_t, std::int64_t>> held;
    for (int k = 0; k < per_step; ++k) {
      bool alloc = held.empty() || rng() % 2;
      if (alloc) {
        std::int64_t b = 16 + static_cast<std::int64_t>(rng() % 4096);
        Category c = rng() % 5 == 0 ? Category::HostOffloaded : Category::SavedActivations;
        Space sp = c == Category::HostOffloaded ? Space::Host : Space::Device;
        ev(b, c, sp, static_cast<std::int32_t>(rng() % 4), 1 + static_cast<std::uint32_t>(rng() % 2), s,
           Phase::Forward, id);
        held.push_back({id++, sp == Space::Device ? b : -b});
        if (sp == Space::Device) live += b;
      } else {
        auto [hid, b] = held.back();
        held.pop_back();
        bool dev = b > 0;
        ev(-std::abs(b), dev ? Category::SavedActivations : Category::HostOffloaded,
           dev ? Space::Device : Space::Host, 0, 1, s, Phase::Backward, hid);
        if (dev) live -= b;
      }
      step_peak = std::max(step_peak, static_cast<std::uint64_t>(live));
    }
    for (auto it = held.rbegin(); it != held.rend(); ++it) {
      bool dev = it->second > 0;
      ev(-std::abs(it->second), dev ? Category::SavedActivations : Category::HostOffloaded,
         dev ? Space::Device : Space::Host, 1, 2, s, Phase::Backward, it->first);
      if (dev) live -= it->second;
    }
    StepStats st;
    st.step = s;
    st.counted = s >= 1;
    st.loss = 5.0 / (s + 1) + 1e-9 * static_cast<double>(rng() % 1000);
    st.time_ms = static_cast<double>(now - start) / 1e6;
    st.peak_bytes = step_peak;
    st.reserved_bytes = step_peak + 64;
    st.start_ns = start;
    st.end_ns = now;
    t.step_stats.push_back(st);
    if (st.counted) peak = std::max(peak, step_peak);
    if (s == steps - 1) {
      t.step_end_event = t.events.size();
      t.step_start_ns = start;
      t.step_end_ns = now;
    }
    now += 10;
  }
  ev(-1024, Category::Workspace, Space::Device, -1, 3, steps - 1, Phase::Optimizer, 2);
  t.peak_bytes = peak;
  t.predicted_peak_bytes = peak;
  t.peak_reserved_bytes = peak + 64;
  t.static_bytes = 4096;
  t.activation_peak_bytes = peak - 5120;
  t.saved_bytes_per_block = {1, 2, 3, 4};
  t.host_bytes_per_block = {0, 5, 0, 0};
  t.block_forwards = 5;
  t.grad_checksum = 0x0123456789abcdefULL;
  t.profiler_overhead_ns = 42;
  t.peak_tensors = {{"h0.mlp.fc,out", 4096}, {"params", 1024}};
  t.plan = validate_schedule(t.schedule, BlockGraph(t.model));
  const std::int64_t t0 = t.step_start_ns;
  for (int k = 0; k < 20; ++k) {
    OpRecord o;
    o.start_ns = t0 + k * 10;
    o.end_ns = o.start_ns + 9;
    o.stream = k % 4 == 3 ? Stream::CopyToHost : Stream::Compute;
    o.name = k == 5 ? "op, with \"comma\"" : "h" + std::to_string(k % 2) + ".mlp.fc";
    o.op = "mlp.fc";
    o.block = k % 2;
    o.phase = k < 10 ? Phase::Forward : Phase::Backward;
    o.step = steps - 1;
    o.flops = 1000 + static_cast<std::uint64_t>(k);
    o.bytes = 64;
    o.op_id = static_cast<std::uint64_t>(k + 100);
    (o.phase == Phase::Forward ? t.flops.forward : t.flops.backward) += o.flops;
    t.ops.push_back(o);
  }
  // The schedule's actions in order (forward 0..3, backward 3..0), the head before backward 3.
  for (std::size_t k = 0; k < t.schedule.actions.size(); ++k) {
    const Action& a = t.schedule.actions[k];
    ScheduleRecord r;
    r.index = k;
    r.action = to_string(a.kind);
    r.block = a.block;
    r.keep = k == 0 ? "ln1.out,attn.qkv" : (a.kind == ActionKind::Forward ? "all" : "");
    r.phase = a.kind == ActionKind::Forward ? Phase::Forward : Phase::Backward;
    r.start_ns = t0 + static_cast<std::int64_t>(k) * 50;
    r.end_ns = r.start_ns + 49;
    r.step = steps - 1;
    if (a.kind == ActionKind::Backward && a.block == t.model.layers - 1) {
      ScheduleRecord h = r;
      h.action = "head";
      h.keep.clear();
      h.phase = Phase::Forward;
      t.schedule_records.push_back(h);
    }
    t.schedule_records.push_back(r);
  }
  LedgerEntry l;
  l.block = 1;
  l.tensor = "attn.probs";
  l.bytes = 512;
  l.created_ns = t0 + 3;
  l.freed_ns = t0 + 99;
  l.created = Phase::Recompute;
  l.category = Category::RecomputeTemps;
  l.decision = "recomputed";
  l.alloc_id = 11;
  l.free_id = 12;
  l.why = "rebuilt from what the block held; alone it needs attn.softmax, \"scaled\": 4.52 MFLOP";
  t.ledger.push_back(l);
  return t;
}

inline std::string read_error(const std::string& dir) {
  try {
    read_run_dir(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace remat::testing
