// trace.json in the Chrome trace event format (the JSON object form), which Perfetto and
// chrome://tracing open: one process for the run, one thread per stream (collectives on `comm`,
// with their group's ranks) with its ops or kernels
// as complete ("X") events, a thread for the schedule's actions and one for the phases, and
// counters ("C") for live bytes per category, the device total and the host total, all on
// the run's clock in microseconds. Written by hand for speed: a million ops is a few hundred MB.
#include <algorithm>
#include <cstdint>

#include "core/analysis/memory_timeline.h"
#include "core/trace/csv.h"
#include "core/trace/run_dir.h"
#include "core/trace/summary.h"

namespace remat {

namespace {

constexpr int kPid = 1;
constexpr int kScheduleTid = 10, kPhaseTid = 11;
int stream_tid(Stream s) { return static_cast<int>(s) + 1; }

class EventWriter {
 public:
  explicit EventWriter(csv::OutFile& f) : f_(f) {}
  // Starts an event object; the caller writes the rest and calls end().
  void begin(const char* ph, std::string_view name, int tid) {
    f_.write(first_ ? "\n" : ",\n");
    first_ = false;
    f_.write("{\"ph\":\"");
    f_.write(ph);
    f_.write("\",\"pid\":");
    f_.i64(kPid);
    f_.write(",\"tid\":");
    f_.i64(tid);
    f_.write(",\"name\":");
    f_.json_string(name);
  }
  void ts(std::int64_t ns) {
    f_.write(",\"ts\":");
    f_.ns_as_us(ns);
  }
  // The duration from start to end: 0 when end is before start, and no overflow for any two
  // times (a trace read from disk has them in [0, limits::kClockNs] anyway).
  void dur(std::int64_t start, std::int64_t end) {
    std::int64_t d = 0;
    if (end > start && __builtin_sub_overflow(end, start, &d)) d = INT64_MAX;
    f_.write(",\"dur\":");
    f_.ns_as_us(d);
  }
  void cat(std::string_view c) {
    f_.write(",\"cat\":");
    f_.json_string(c);
  }
  // args: call arg_* between args_begin and args_end.
  void args_begin() {
    f_.write(",\"args\":{");
    arg_first_ = true;
  }
  void key(std::string_view k) {
    if (!arg_first_) f_.put(',');
    arg_first_ = false;
    f_.json_string(k);
    f_.put(':');
  }
  void arg(std::string_view k, std::string_view v) {
    key(k);
    f_.json_string(v);
  }
  void arg(std::string_view k, std::int64_t v) {
    key(k);
    f_.i64(v);
  }
  void arg_u(std::string_view k, std::uint64_t v) {
    key(k);
    f_.u64(v);
  }
  void args_end() { f_.put('}'); }
  void end() { f_.put('}'); }

  void thread_name(int tid, std::string_view name, int sort) {
    begin("M", "thread_name", tid);
    ts(0);
    args_begin();
    arg("name", name);
    args_end();
    end();
    begin("M", "thread_sort_index", tid);
    ts(0);
    args_begin();
    arg("sort_index", std::int64_t{sort});
    args_end();
    end();
  }

 private:
  csv::OutFile& f_;
  bool first_ = true, arg_first_ = true;
};

}  // namespace

void write_chrome_trace(const Trace& t, const std::string& path) {
  csv::OutFile f(path);
  f.write(kChromeTraceHead);
  f.i64(t.format_version);
  f.write(",\"model\":");
  f.json_string(t.model.name);
  f.write(",\"policy\":");
  f.json_string(t.policy_params.empty() ? t.policy : t.policy + ":" + t.policy_params);
  f.write(",\"device\":");
  f.json_string(t.device);
  f.write(",\"version\":");
  f.json_string(program_version());
  f.write("},\"traceEvents\":[");
  EventWriter w(f);

  std::string process = "rematlab " + t.device + ": " + t.model.name + " / " +
                        (t.policy_params.empty() ? t.policy : t.policy + ":" + t.policy_params);
  w.begin("M", "process_name", 0);
  w.ts(0);
  w.args_begin();
  w.arg("name", process);
  w.args_end();
  w.end();
  for (int s = 0; s < kNumStreams; ++s)
    w.thread_name(stream_tid(static_cast<Stream>(s)), to_string(static_cast<Stream>(s)), s + 2);
  w.thread_name(kPhaseTid, "phases", 0);
  w.thread_name(kScheduleTid, "schedule", 1);

  // Phases: runs of schedule actions in the same phase.
  const auto& recs = t.schedule_records;
  for (std::size_t i = 0; i < recs.size();) {
    std::size_t k = i;
    std::int64_t end = recs[i].end_ns;
    while (k + 1 < recs.size() && recs[k + 1].phase == recs[i].phase) end = std::max(end, recs[++k].end_ns);
    w.begin("X", to_string(recs[i].phase), kPhaseTid);
    w.cat("phase");
    w.ts(recs[i].start_ns);
    w.dur(recs[i].start_ns, end);
    w.end();
    i = k + 1;
  }
  for (const auto& r : recs) {
    std::string name = r.action + (r.block >= 0 ? " " + std::to_string(r.block) : std::string());
    w.begin("X", name, kScheduleTid);
    w.cat("schedule");
    w.ts(r.start_ns);
    w.dur(r.start_ns, r.end_ns);
    w.args_begin();
    w.arg_u("index", r.index);
    w.arg("action", r.action);
    w.arg("block", std::int64_t{r.block});
    if (!r.keep.empty()) w.arg("keep", r.keep);
    w.arg("phase", to_string(r.phase));
    w.args_end();
    w.end();
  }
  for (const auto& o : t.ops) {
    w.begin("X", o.name, stream_tid(o.stream));
    w.cat(to_string(o.phase));
    w.ts(o.start_ns);
    w.dur(o.start_ns, o.end_ns);
    w.args_begin();
    w.arg("op", o.op);
    w.arg("block", std::int64_t{o.block});
    w.arg("step", std::int64_t{o.step});
    w.arg_u("flops", o.flops);
    w.arg_u("bytes", o.bytes);
    w.arg_u("op_id", o.op_id);
    if (!o.ranks.empty()) w.arg("ranks", ranks_text(o.ranks));
    w.args_end();
    w.end();
  }

  // Memory counters, one per category and one per space, each with a single series "bytes",
  // sampled only when it changes (a counter holds its value until its next sample).
  bool first = true;
  TimelinePoint prev;
  std::string names[kNumCategories];
  for (int c = 0; c < kNumCategories; ++c) names[c] = std::string("mem ") + to_string(static_cast<Category>(c));
  auto counter = [&w](std::string_view name, std::int64_t ts, std::int64_t v) {
    w.begin("C", name, 0);
    w.ts(ts);
    w.args_begin();
    w.arg("bytes", v);
    w.args_end();
    w.end();
  };
  for_each_timeline_point(t, [&](const TimelinePoint& p) {
    if (first || p.device != prev.device) counter("device memory", p.t_ns, p.device);
    if (first || p.host != prev.host) counter("host memory", p.t_ns, p.host);
    for (int c = 0; c < kNumCategories; ++c)
      if (first || p.live[c] != prev.live[c]) counter(names[c], p.t_ns, p.live[c]);
    prev = p;
    first = false;
  });
  f.write("\n]}\n");
  f.commit();
}

}  // namespace remat
