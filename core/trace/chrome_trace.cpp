// trace.json in the Chrome trace event format (the JSON object form), which Perfetto and
// chrome://tracing open: one process for the run, one thread per stream (collectives on `comm`,
// with their group's ranks) with its ops or kernels
// as complete ("X") events, a thread for the schedule's actions and one for the phases (forward,
// recompute, backward and optimizer, from the ops), and counters ("C") for live bytes per
// category, the device total and the host total, all on the run's clock in microseconds.
// A run of several ranks is one process per rank, each on its own clock from the start of its
// last counted step (as the Ranks page aligns them), with a flow ("s" / "f") from each
// collective to its partners on the other ranks. Written by hand for speed: a million ops is a
// few hundred MB.
#include <algorithm>
#include <cstdint>

#include "core/analysis/collective_links.h"
#include "core/analysis/memory_timeline.h"
#include "core/analysis/phase_spans.h"
#include "core/trace/chrome_trace.h"
#include "core/trace/csv.h"
#include "core/trace/run_dir.h"
#include "core/trace/summary.h"
#include "core/util/error.h"

namespace remat {

namespace {

constexpr int kScheduleTid = 10, kPhaseTid = 11;
int stream_tid(Stream s) { return static_cast<int>(s) + 1; }

class EventWriter {
 public:
  explicit EventWriter(csv::OutFile& f) : f_(f) {}
  // The process the next events belong to, and what is taken off their times (its clock's zero).
  void process(int pid, std::int64_t zero_ns) {
    pid_ = pid;
    zero_ = zero_ns;
  }
  // Starts an event object; the caller writes the rest and calls end().
  void begin(const char* ph, std::string_view name, int tid) {
    f_.write(first_ ? "\n" : ",\n");
    first_ = false;
    f_.write("{\"ph\":\"");
    f_.write(ph);
    f_.write("\",\"pid\":");
    f_.i64(pid_);
    f_.write(",\"tid\":");
    f_.i64(tid);
    f_.write(",\"name\":");
    f_.json_string(name);
  }
  void ts(std::int64_t ns) {
    f_.write(",\"ts\":");
    std::int64_t t = ns;
    if (zero_ != 0 && __builtin_sub_overflow(ns, zero_, &t)) t = ns < 0 ? INT64_MIN : INT64_MAX;
    f_.ns_as_us(t);
  }
  // The time of a metadata event: 0, whatever the process's clock.
  void ts0() {
    f_.write(",\"ts\":");
    f_.ns_as_us(0);
  }
  // A raw field (the caller writes valid JSON after the comma).
  void field(std::string_view k, std::string_view json) {
    f_.put(',');
    f_.json_string(k);
    f_.put(':');
    f_.write(json);
  }
  void field_u(std::string_view k, std::uint64_t v) {
    f_.put(',');
    f_.json_string(k);
    f_.put(':');
    f_.u64(v);
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
    ts0();
    args_begin();
    arg("name", name);
    args_end();
    end();
    begin("M", "thread_sort_index", tid);
    ts0();
    args_begin();
    arg("sort_index", std::int64_t{sort});
    args_end();
    end();
  }

 private:
  csv::OutFile& f_;
  bool first_ = true, arg_first_ = true;
  int pid_ = 1;
  std::int64_t zero_ = 0;
};

void write_head(csv::OutFile& f, const Trace& t) {
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
}

// One run as process `pid` (its events' times less `zero`).
void write_process(EventWriter& w, const Trace& t, int pid, const std::string& process, int sort, std::int64_t zero) {
  w.process(pid, zero);
  w.begin("M", "process_name", 0);
  w.ts0();
  w.args_begin();
  w.arg("name", process);
  w.args_end();
  w.end();
  w.begin("M", "process_sort_index", 0);
  w.ts0();
  w.args_begin();
  w.arg("sort_index", std::int64_t{sort});
  w.args_end();
  w.end();
  for (int s = 0; s < kNumStreams; ++s)
    w.thread_name(stream_tid(static_cast<Stream>(s)), to_string(static_cast<Stream>(s)), s + 2);
  w.thread_name(kPhaseTid, "phases", 0);
  w.thread_name(kScheduleTid, "schedule", 1);

  // Phases: runs of ops of one phase (the optimizer's too, which no schedule action has).
  for (const PhaseSpan& p : phase_spans(t)) {
    w.begin("X", to_string(p.phase), kPhaseTid);
    w.cat("phase");
    w.ts(p.start_ns);
    w.dur(p.start_ns, p.end_ns);
    w.end();
  }
  for (const auto& r : t.schedule_records) {
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
}

}  // namespace

void write_chrome_trace(const Trace& t, const std::string& path) {
  csv::OutFile f(path);
  write_head(f, t);
  f.write("},\"traceEvents\":[");
  EventWriter w(f);
  write_process(w, t, 1,
                "rematlab " + t.device + ": " + t.model.name + " / " +
                    (t.policy_params.empty() ? t.policy : t.policy + ":" + t.policy_params),
                0, 0);
  f.write("\n]}\n");
  f.commit();
}

void write_ranks_chrome_trace(const std::vector<ChromeRank>& ranks, const std::string& path) {
  const Trace* any = nullptr;
  for (const auto& r : ranks)
    if (r.trace && !any) any = r.trace;
  if (!any) throw Error("no rank has a run to export");
  // Each rank on its own clock from its step's start, all shifted by one amount so no time is
  // negative (memory events of a rank may come before its step).
  std::int64_t lead = 0;
  std::vector<const Trace*> traces;
  for (const auto& r : ranks) {
    traces.push_back(r.trace);
    if (!r.trace) continue;
    std::int64_t earliest = r.trace->step_start_ns;
    const TimelineRange tr = timeline_range(*r.trace);
    earliest = std::min(earliest, tr.start_ns);
    for (const auto& o : r.trace->ops) earliest = std::min(earliest, o.start_ns);
    for (const auto& s : r.trace->schedule_records) earliest = std::min(earliest, s.start_ns);
    lead = std::max(lead, r.trace->step_start_ns - earliest);
  }
  csv::OutFile f(path);
  write_head(f, *any);
  f.write(",\"ranks\":");
  f.i64(static_cast<std::int64_t>(ranks.size()));
  f.write(",\"clock\":\"each rank's own, from the start of its last counted step\"},\"traceEvents\":[");
  EventWriter w(f);
  for (std::size_t k = 0; k < ranks.size(); ++k)
    if (ranks[k].trace)
      write_process(w, *ranks[k].trace, static_cast<int>(k) + 1, ranks[k].name, static_cast<int>(k),
                    ranks[k].trace->step_start_ns - lead);
  // Flows from each collective to its partners: "s" inside the source's slice at its start, "f"
  // bound to the partner's slice ("bp": "e") at its end.
  const CollectiveLinks links = collective_links(traces);
  std::uint64_t id = 1;
  for (const Flow& fl : links.flows) {
    const Trace& a = *traces[static_cast<std::size_t>(fl.from.rank)];
    const Trace& b = *traces[static_cast<std::size_t>(fl.to.rank)];
    const OpRecord& src = a.ops[fl.from.op];
    const OpRecord& dst = b.ops[fl.to.op];
    w.process(fl.from.rank + 1, a.step_start_ns - lead);
    w.begin("s", src.op, stream_tid(src.stream));
    w.cat("collective");
    w.ts(src.start_ns);
    w.field_u("id", id);
    w.end();
    w.process(fl.to.rank + 1, b.step_start_ns - lead);
    w.begin("f", src.op, stream_tid(dst.stream));
    w.cat("collective");
    w.ts(std::max(dst.start_ns, dst.end_ns - 1));
    w.field_u("id", id);
    w.field("bp", "\"e\"");
    w.end();
    ++id;
  }
  f.write("\n]}\n");
  f.commit();
}

}  // namespace remat
