// The parts of a command's start-up before its run (process start, plugins, planning), timed
// on the wall clock and put in front of the run's own parts (Trace::startup_breakdown_ms).
#pragma once
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/trace/trace.h"

namespace remat::cli {

class StartupParts {
 public:
  // A part measured elsewhere; a negative time (unknown) is left out.
  void add(std::string name, double ms) {
    if (ms >= 0.0) parts_.emplace_back(std::move(name), ms);
  }
  // The part from the previous mark (or this object's creation) to now.
  void mark(std::string name) {
    const auto now = std::chrono::steady_clock::now();
    parts_.emplace_back(std::move(name), std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }
  void put_first(Trace& t) const {
    t.startup_breakdown_ms.insert(t.startup_breakdown_ms.begin(), parts_.begin(), parts_.end());
  }

 private:
  std::vector<std::pair<std::string, double>> parts_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace remat::cli
