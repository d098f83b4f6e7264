// Running plugin code in a child process: fork (no exec), do the work in the child, send the
// result back over a pipe as JSON, `_exit`. A child that crashes, hangs past its time limit,
// exits without replying or writes something that is not a reply is reported, never felt by
// the parent.
//
// The child is a fork of a possibly multi-threaded parent (the desktop app plans on worker
// threads): only the forking thread exists in it, so a lock another thread held at the fork
// stays held there. glibc makes malloc and stdio safe across fork; the child runs nothing but the
// work (plugin code), the JSON encoding and write(2), then _exit(2) (no atexit handlers, no
// stdio flush, no static destructors). A fork never happens while another thread is inside
// OpenBLAS, whose fork handler would hang that thread's GEMM (core/util/fork_guard.h). A plugin
// that takes other locks of the parent's (a logging library) may deadlock in the child; the time
// limit then stops it.
//
// The child is a keeper (a child subreaper) that forks the worker running the work: whatever the
// plugin starts below it, even a process that left its group with setsid(), is killed when the
// worker ends or the time limit stops it, so nothing a plugin started outlives the command (or
// holds its output open). The worker's address space is limited (RLIMIT_AS) to what the program
// had mapped plus ChildLimits::memory_bytes.
//
// In the child: standard input is /dev/null, standard output goes to standard error (what a
// plugin prints never mixes with the program's own output, e.g. `--json`), every other inherited
// descriptor is closed, signal handlers are back to their defaults and no signal is blocked; the
// child is in its own process group (stopped with everything it started) and is killed when the
// parent dies (Linux PR_SET_PDEATHSIG).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/util/error.h"

namespace remat {

// What happened to the child (crash, time limit, no reply, a bad reply), as opposed to an
// exception the work threw in it (a plain Error with that exception's message).
class ChildProcessError : public Error {
 public:
  using Error::Error;
};

// The environment variable of a plugin process's memory limit (bytes above what the program has
// mapped, e.g. 4GiB; 0: none) and its default.
inline constexpr const char* kPluginMemoryVar = "REMAT_PLUGIN_MEMORY";
inline constexpr std::uint64_t kDefaultPluginMemory = std::uint64_t{8} << 30;

struct ChildLimits {
  double timeout_s = 60;                       // wall clock, from the fork to the child's exit
  std::uint64_t memory_bytes = 0;              // address space the worker may add; 0: no limit
  std::size_t max_reply_bytes = 1 << 20;       // a longer reply is refused
  std::string reply_name = "reply";            // in messages: "... is not a plan reply"
  std::string timeout_hint;                    // appended to the timeout message, e.g. how to raise it
};

// Runs `work` in a child process and returns the JSON it returned. Throws Error with the
// exception's message when `work` threw, or ChildProcessError saying what happened to the child: "it crashed
// (signal SIGSEGV: Segmentation fault)", "it did not finish within 2 s (stopped...)", "it exited
// with status 3 without replying", "it sent something that is not a plan reply: '...'".
nlohmann::json run_in_child(const std::function<nlohmann::json()>& work, const ChildLimits& limits);

// Reads a time limit in seconds from environment variable `var` (a positive, finite number),
// or `fallback` when it is unset or empty. Throws ConfigError naming the variable and the value.
double timeout_from_env(const char* var, double fallback);
// A size in bytes from `var` (parse_bytes: 4096, 512MiB, 8GiB; 0 for none, else at least 16 MiB),
// or `fallback` when it is unset or empty. Throws ConfigError naming the variable and the value.
std::uint64_t memory_from_env(const char* var, std::uint64_t fallback);

}  // namespace remat
