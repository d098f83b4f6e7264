// Writing and reading back a run directory of a big run: a million ops and a million memory
// events (all in the last counted step, so memory_timeline.csv and trace.json's counters are a
// million rows too). Prints the time of each part and the file sizes; with --max-s S, exits 1
// when writing plus reading takes longer than S seconds.
//
//   trace_io_bench [--ops N] [--events N] [--dir PATH] [--max-s S] [--keep]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "core/analysis/memory_timeline.h"
#include "core/graph/block_graph.h"
#include "core/schedule/validator.h"
#include "core/trace/run_dir.h"
#include "core/trace/summary.h"

namespace fs = std::filesystem;
using namespace remat;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the whole process, every thread (what the work costs, whatever else runs).
double cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

Trace big_trace(std::size_t nops, std::size_t nevents) {
  std::mt19937_64 rng(42);
  Trace t;
  t.model.name = "bench";
  t.model.layers = 48;
  t.policy = "none";
  t.schedule = store_all_schedule(t.model.layers);
  t.schedule.policy = "none";
  t.device = "cpu";
  t.warmup = 1;
  t.steps = 1;
  const char* kinds[] = {"ln1.out", "attn.qkv", "attn.probs", "attn.out", "mlp.fc", "mlp.gelu_out",
                         "mlp.proj", "ln2.out"};
  for (int b = 0; b < t.model.layers; ++b)
    for (const char* k : kinds) t.names.push_back(k);
  t.names.push_back("params");
  const std::uint32_t params = static_cast<std::uint32_t>(t.names.size() - 1);
  std::int64_t now = 1000;
  std::uint64_t id = 1;
  MemoryEvent p;
  p.t_ns = now++;
  p.delta = 1 << 30;
  p.id = id++;
  p.category = Category::Parameters;
  p.tensor = params;
  p.phase = Phase::Init;
  t.events.push_back(p);
  // Warmup step 0: nothing; the counted step 1 holds everything.
  StepStats w;
  w.step = 0;
  w.counted = false;
  w.loss = 5.5;
  w.time_ms = 1.0;
  w.start_ns = now;
  w.end_ns = now + 1000;
  t.step_stats.push_back(w);
  now += 2000;
  t.step_first_event = t.events.size();
  t.step_start_ns = now;
  struct Held {
    std::uint64_t id;
    std::int64_t bytes;
    Category category;
  };
  std::vector<Held> held;
  std::int64_t live = p.delta, peak = live;
  const std::size_t per_op = nevents / std::max<std::size_t>(1, nops) + 1;
  std::size_t emitted = 0;
  for (std::size_t i = 0; i < nops; ++i) {
    OpRecord o;
    o.start_ns = now;
    o.end_ns = now + 50 + static_cast<std::int64_t>(rng() % 200);
    o.stream = Stream::Compute;
    int b = static_cast<int>(i % static_cast<std::size_t>(t.model.layers));
    o.block = b;
    o.op = kinds[i % 8];
    o.name = "h" + std::to_string(b) + "." + o.op;
    o.phase = i < nops / 2 ? Phase::Forward : Phase::Backward;
    o.step = 1;
    o.flops = 1000000 + rng() % 1000;
    o.bytes = 4096;
    o.op_id = i;
    for (std::size_t k = 0; k < per_op && emitted < nevents - 1; ++k, ++emitted) {
      MemoryEvent e;
      e.t_ns = now + static_cast<std::int64_t>(k);
      e.step = 1;
      e.block = b;
      e.op_seq = i;
      bool alloc = held.size() < 64 && (held.empty() || rng() % 2);
      if (alloc) {
        e.delta = 256 + static_cast<std::int64_t>(rng() % 65536);
        e.id = id++;
        e.category = o.phase == Phase::Forward ? Category::SavedActivations : Category::ActivationGrads;
        e.tensor = static_cast<std::uint32_t>(b * 8 + static_cast<int>(i % 8));
        held.push_back({e.id, e.delta, e.category});
      } else {
        const Held h = held.back();
        held.pop_back();
        e.delta = -h.bytes;
        e.id = h.id;
        e.category = h.category;  // a free is booked where its allocation was
        e.tensor = static_cast<std::uint32_t>(b * 8);
      }
      e.phase = o.phase;
      live += e.delta;
      peak = std::max(peak, live);
      e.reserved = static_cast<std::uint64_t>(peak);
      t.events.push_back(e);
    }
    now = o.end_ns + 1;
    (o.phase == Phase::Forward ? t.flops.forward : t.flops.backward) += o.flops;
    t.ops.push_back(std::move(o));
  }
  t.step_end_event = t.events.size();
  t.step_end_ns = now;
  StepStats s;
  s.step = 1;
  s.loss = 5.25;
  s.time_ms = static_cast<double>(now - t.step_start_ns) / 1e6;
  s.peak_bytes = static_cast<std::uint64_t>(peak);
  s.reserved_bytes = s.peak_bytes;
  s.start_ns = t.step_start_ns;
  s.end_ns = now;
  t.step_stats.push_back(s);
  t.peak_bytes = s.peak_bytes;
  // A consistent run: the schedule's plan, and one record per action (the head before the
  // first backward), as the reader checks.
  t.plan = validate_schedule(t.schedule, BlockGraph(t.model));
  for (std::size_t i = 0; i < t.schedule.actions.size(); ++i) {
    const Action& a = t.schedule.actions[i];
    ScheduleRecord r;
    r.index = i;
    r.action = to_string(a.kind);
    r.block = a.block;
    r.keep = a.kind == ActionKind::Forward ? "all" : "";
    r.phase = a.kind == ActionKind::Forward ? Phase::Forward : Phase::Backward;
    r.start_ns = t.step_start_ns + static_cast<std::int64_t>(i);
    r.end_ns = r.start_ns + 1;
    r.step = 1;
    if (a.kind == ActionKind::Backward && a.block == t.model.layers - 1) {
      ScheduleRecord h = r;
      h.action = "head";
      h.keep.clear();
      h.phase = Phase::Forward;
      t.schedule_records.push_back(h);
    }
    t.schedule_records.push_back(r);
  }
  return t;
}

std::uint64_t dir_bytes(const fs::path& d, std::FILE* out) {
  std::uint64_t total = 0;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(d)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto n = fs::file_size(f);
    total += n;
    std::fprintf(out, "  %-22s %8.1f MB\n", f.filename().c_str(), static_cast<double>(n) / 1e6);
  }
  return total;
}

std::string load_average() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "unknown\n";
  char b[128] = {0};
  if (!std::fgets(b, sizeof b, f)) b[0] = 0;
  std::fclose(f);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t nops = 1000000, nevents = 1000000;
  double max_s = 0;
  bool keep = false;
  fs::path dir = fs::temp_directory_path() / ("rematlab-trace-io-bench-" + std::to_string(::getpid()));
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--ops") nops = std::stoul(next());
    else if (a == "--events") nevents = std::stoul(next());
    else if (a == "--dir") dir = next();
    else if (a == "--max-s") max_s = std::stod(next());
    else if (a == "--keep") keep = true;
    else {
      std::fprintf(stderr, "usage: trace_io_bench [--ops N] [--events N] [--dir PATH] [--max-s S] [--keep]\n");
      return 2;
    }
  }
  Trace t = big_trace(nops, nevents);
  std::printf("trace: %zu ops, %zu memory events, %zu timeline rows\n", t.ops.size(), t.events.size(),
              timeline_range(t).end - timeline_range(t).first + 2);
  std::error_code ec;
  fs::remove_all(dir, ec);

  double t0 = now_s(), u0 = cpu_s();
  write_run_dir(t, dir.string(), false);
  double t1 = now_s(), u1 = cpu_s();
  Trace r = read_run_dir(dir.string());
  double t2 = now_s(), u2 = cpu_s();
  // The parts of the write, separately (into a scratch directory).
  fs::path parts = dir.string() + "-parts";
  fs::create_directories(parts);
  double c0 = now_s();
  write_csv_tables(t, parts.string());
  double c1 = now_s();
  write_chrome_trace(t, (parts / "trace.json").string());
  double c2 = now_s();
  fs::remove_all(parts, ec);

  bool same = summary_json(r) == summary_json(t) && r.events.size() == t.events.size() &&
              r.ops.size() == t.ops.size();
  std::printf("                       wall      CPU (all threads)\n");
  std::printf("write run directory   %6.3f s  %6.3f s\n", t1 - t0, u1 - u0);
  std::printf("read it back          %6.3f s  %6.3f s  (summary.json, every CSV, timeline checked)\n", t2 - t1, u2 - u1);
  std::printf("write + read          %6.3f s  %6.3f s\n", t2 - t0, u2 - u0);
  std::printf("parts, one thread each: CSV tables %.3f s, trace.json %.3f s (wall)\n", c1 - c0, c2 - c1);
  std::printf("load average while it ran: %s", load_average().c_str());
  std::uint64_t total = dir_bytes(dir, stdout);
  std::printf("  %-22s %8.1f MB\n", "total", static_cast<double>(total) / 1e6);
  std::printf("read back the same figures: %s\n", same ? "yes" : "NO");
  if (!keep) fs::remove_all(dir, ec);
  if (!same) return 1;
  if (max_s > 0 && t2 - t0 > max_s) {
    std::printf("FAIL: %.3f s over the limit of %.3f s\n", t2 - t0, max_s);
    return 1;
  }
  return 0;
}
