// The readers of what users hand us, by input size: profiler traces of 10^5 to 10^7 events
// (import_profiler_trace; where 10^7 events would pass the 1 GiB a JSON file may have, the
// largest trace under it instead), schedules of 10^5 to 10^7 actions (load_schedule_file, 10^7
// being the documented maximum), CSV headers of 10^4 to 10^6 columns, white space before a trace, and,
// for the slope it had, nlohmann's callback parser with the depth check our reader used before.
// Each measurement runs in a child process of its own: its wall time and its peak resident
// memory (getrusage of the child). Prints one line each; with --max-s S exits 1 when a
// measurement at the documented limits took longer than S seconds.
//
//   json_read_bench [--dir PATH] [--max-events N] [--max-actions N] [--max-s S] [--quick]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/schedule/schedule.h"
#include "core/trace/csv.h"
#include "core/trace/import_trace.h"
#include "core/trace/profiler_trace.h"
#include "core/util/error.h"
#include "core/util/json_io.h"
#include "core/util/limits.h"

namespace fs = std::filesystem;
using namespace remat;

namespace {

struct Result {
  double seconds = 0;
  double peak_mib = 0;
  std::string outcome;  // "ok ..." or the start of the error
};

// Runs `f` in a child; it returns what to print as the outcome.
Result measure(const std::function<std::string()>& f) {
  int p[2];
  if (::pipe(p) != 0) std::exit(2);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    std::string out;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      out = f();
    } catch (const std::exception& e) {
      out = std::string("refused: ") + e.what();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (out.size() > 150) out = out.substr(0, 150) + "...";
    const std::string msg = std::to_string(s) + "\n" + out;
    (void)!::write(p[1], msg.data(), msg.size());
    ::_exit(0);
  }
  ::close(p[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<std::size_t>(n));
  ::close(p[0]);
  int status = 0;
  rusage ru{};
  ::wait4(pid, &status, 0, &ru);
  Result r;
  const auto nl = msg.find('\n');
  if (nl == std::string::npos) {
    r.outcome = "the child died (status " + std::to_string(status) + ")";
    return r;
  }
  r.seconds = std::stod(msg.substr(0, nl));
  r.outcome = msg.substr(nl + 1);
  r.peak_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  return r;
}

void print(const char* what, std::uint64_t n, std::uint64_t bytes, const Result& r) {
  std::printf("%-34s %12llu %10.1f MB %9.3f s %9.0f MiB  %s\n", what, static_cast<unsigned long long>(n),
              static_cast<double>(bytes) / 1e6, r.seconds, r.peak_mib, r.outcome.c_str());
  std::fflush(stdout);
}

void write(const std::string& path, const std::string& s) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(2);
  }
}

// A torch.profiler trace of `n` events: per group of 8, four CPU ops (one a backward), a
// runtime launch, a kernel, and a [memory] allocation and its free.
std::string profiler_text(std::uint64_t n) {
  std::string s;
  s.reserve(n * 100 + 64);
  s += "{\"schemaVersion\":1,\"traceEvents\":[";
  char b[400];
  for (std::uint64_t i = 0; i < n; ++i) {
    const unsigned long long ts = 1000 + 10 * i, id = i / 8;
    int len = 0;
    switch (i % 8) {
      case 0: case 1: case 2:
        len = std::snprintf(b, sizeof b, "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,"
                                         "\"ts\":%llu,\"dur\":8,\"args\":{\"External id\":%llu}}", ts, id);
        break;
      case 3:
        len = std::snprintf(b, sizeof b, "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"MmBackward0\",\"pid\":1,\"tid\":2,"
                                         "\"ts\":%llu,\"dur\":8,\"args\":{\"External id\":%llu}}", ts, id);
        break;
      case 4:
        len = std::snprintf(b, sizeof b, "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,"
                                         "\"tid\":1,\"ts\":%llu,\"dur\":3,\"args\":{\"correlation\":%llu}}", ts, id);
        break;
      case 5:
        len = std::snprintf(b, sizeof b, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"sgemm\",\"pid\":0,\"tid\":7,"
                                         "\"ts\":%llu,\"dur\":5,\"args\":{\"correlation\":%llu}}", ts, id);
        break;
      case 6: case 7:
        len = std::snprintf(b, sizeof b, "{\"ph\":\"i\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":%llu,"
                                         "\"args\":{\"Addr\":%llu,\"Bytes\":%d}}",
                            ts, 4096 + 512 * (id % 1000), i % 8 == 6 ? 512 : -512);
        break;
    }
    s.append(b, static_cast<std::size_t>(len));
    s += i + 1 < n ? "," : "";
  }
  s += "]}\n";
  return s;
}

std::string schedule_text(std::uint64_t n) {
  std::string s;
  s.reserve(n * 48 + 64);
  s += "{\"format\": \"rematlab-schedule\", \"version\": 1, \"blocks\": 1000, \"actions\": [";
  for (std::uint64_t i = 0; i < n; ++i) {
    s += i ? ",{\"action\":\"forward\",\"block\":" : "{\"action\":\"forward\",\"block\":";
    s += std::to_string(i % 1000);
    s += ",\"keep\":\"all\"}";
  }
  s += "]}\n";
  return s;
}

// What parse_json did before: nlohmann's callback parser with a depth check.
std::string old_parse(const std::string& text) {
  auto depth_check = [](int depth, nlohmann::json::parse_event_t ev, nlohmann::json&) {
    if ((ev == nlohmann::json::parse_event_t::object_start || ev == nlohmann::json::parse_event_t::array_start) &&
        depth >= limits::kJsonDepth)
      throw LimitError("nested");
    return true;
  };
  return "ok " + std::to_string(nlohmann::json::parse(text, depth_check)["traceEvents"].size()) + " events parsed";
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = (fs::temp_directory_path() / ("rematlab-json-bench-" + std::to_string(::getpid()))).string();
  std::uint64_t max_events = 10'000'000, max_actions = static_cast<std::uint64_t>(limits::kScheduleActions);
  double max_s = 0;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--dir") dir = next();
    else if (a == "--max-events") max_events = std::stoull(next());
    else if (a == "--max-actions") max_actions = std::stoull(next());
    else if (a == "--max-s") max_s = std::stod(next());
    else if (a == "--quick") quick = true;
    else {
      std::fprintf(stderr, "usage: json_read_bench [--dir PATH] [--max-events N] [--max-actions N] [--max-s S] [--quick]\n");
      return 2;
    }
  }
  if (quick) max_events = 100'000, max_actions = 100'000;
  fs::create_directories(dir);
  std::printf("%-34s %12s %13s %11s %13s  %s\n", "reader", "n", "input", "wall", "peak RSS", "outcome");
  bool slow = false;

  // nlohmann's callback parser, as parse_json used it: quadratic in an array of objects.
  for (std::uint64_t n : {10'000ULL, 20'000ULL, 40'000ULL, 80'000ULL}) {
    if (quick && n > 20'000) break;
    const std::string text = profiler_text(n);
    print("callback parser (before)", n, text.size(), measure([&] { return old_parse(text); }));
  }
  for (std::uint64_t n = 100'000; n <= max_events; n *= 10) {
    const std::string path = dir + "/trace.json";
    std::uint64_t bytes = 0;
    {
      std::string text = profiler_text(n);
      if (text.size() > limits::kJsonFileBytes) {  // the largest trace the reader accepts instead
        n = static_cast<std::uint64_t>(static_cast<double>(n) * limits::kJsonFileBytes / text.size() * 0.999);
        text = profiler_text(n);
      }
      bytes = text.size();
      write(path, text);
    }
    const Result r = measure([&] {
      Trace t = import_profiler_trace(path);
      return "ok " + std::to_string(t.ops.size()) + " ops, " + std::to_string(t.events.size()) + " memory events";
    });
    print("import_profiler_trace", n, bytes, r);
    slow = slow || (n * 10 > max_events && max_s > 0 && r.seconds > max_s);
    fs::remove(path);
  }
  for (std::uint64_t n = 100'000; n <= max_actions; n *= 10) {
    const std::string path = dir + "/schedule.json";
    std::uint64_t bytes = 0;
    {
      const std::string text = schedule_text(n);
      bytes = text.size();
      write(path, text);
    }
    const Result r = measure([&] { return "ok " + std::to_string(load_schedule_file(path).actions.size()) + " actions"; });
    print("load_schedule_file", n, bytes, r);
    slow = slow || (n == max_actions && max_s > 0 && r.seconds > max_s);
    fs::remove(path);
  }
  if (!quick) {  // one past the documented maximum: refused, not read whole
    const std::string path = dir + "/schedule.json";
    const std::uint64_t n = static_cast<std::uint64_t>(limits::kScheduleActions) + 1;
    std::uint64_t bytes = 0;
    {
      const std::string text = schedule_text(n);
      bytes = text.size();
      write(path, text);
    }
    print("load_schedule_file (limit + 1)", n, bytes,
          measure([&] { return "ok " + std::to_string(load_schedule_file(path).actions.size()) + " actions"; }));
    fs::remove(path);
  }
  if (!quick) {  // a trace one byte past the documented file size: refused before it is read
    const std::string path = dir + "/big.json";
    { std::ofstream(path, std::ios::binary) << "{\"traceEvents\": []}"; }
    fs::resize_file(path, limits::kJsonFileBytes + 1);
    print("import_trace_file (1 GiB + 1)", 0, limits::kJsonFileBytes + 1,
          measure([&] { return (import_trace_file(path), std::string("ok")); }));
    fs::remove(path);
  }
  // The densest shapes: what parse_json's values take per byte of text (the text itself, read
  // whole, is in the peak too).
  for (const char* elem : {"0", "[]", "{}", "\"\"", "{\"\":0}"}) {
    const std::uint64_t n = quick ? 1'000'000 : 10'000'000;
    std::string text = "[";
    for (std::uint64_t i = 0; i < n; ++i) text += (i ? "," : "") + std::string(elem);
    text += "]";
    const std::string what = std::string("parse_json [") + elem + ", ...]";
    print(what.c_str(), n, text.size(),
          measure([&] { return "ok " + std::to_string(parse_json(text, "x").size()) + " values"; }));
  }
  for (std::uint64_t n : {10'000ULL, 100'000ULL, 1'000'000ULL}) {
    std::string header;
    for (std::uint64_t i = 0; i < n; ++i) header += (i ? ",c" : "c") + std::to_string(i);
    header += "\n";
    print("csv::Reader header", n, header.size(), measure([&] {
            csv::Reader r("loss.csv", header);
            return "ok " + std::to_string(r.header().size()) + " columns";
          }));
  }
  {
    const std::string path = dir + "/spaces.json";
    const std::uint64_t spaces = quick ? 10'000'000 : 100'000'000;
    write(path, std::string(spaces, ' ') + "{\"traceEvents\": 5}");
    print("import_trace_file, leading spaces", spaces, spaces + 18,
          measure([&] { return (import_trace_file(path), std::string("ok")); }));
    fs::remove(path);
  }
  fs::remove_all(dir);
  return slow ? 1 : 0;
}
