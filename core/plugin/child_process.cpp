#include "core/plugin/child_process.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <vector>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <nlohmann/json.hpp>

#include "core/plugin/child_reply.h"
#include "core/plugin/registry.h"
#include "core/util/error.h"
#include "core/util/fork_guard.h"
#include "core/util/printable.h"

namespace remat {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kReplyFd = 3;  // where the child finds the write end of the pipe

std::string seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", s);
  return b;
}

std::string signal_text(int sig) {
  std::string s = "signal ";
  if (const char* abbrev = sigabbrev_np(sig)) s += std::string("SIG") + abbrev;
  else s += std::to_string(sig);
  if (const char* d = sigdescr_np(sig)) s += std::string(": ") + d;
  return s;
}

void write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// In the child, before the work: a clean, isolated process (see the header).
void isolate_child(pid_t parent, int reply_fd) {
#ifdef __linux__
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  if (::getppid() != parent) ::_exit(1);  // the parent is already gone
  ::setpgid(0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
  int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, STDIN_FILENO);
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  if (reply_fd != kReplyFd) ::dup2(reply_fd, kReplyFd);
  if (::close_range(kReplyFd + 1, ~0U, 0) != 0)
    for (int fd = kReplyFd + 1; fd < 4096; ++fd) ::close(fd);
}

[[noreturn]] void child_main(const std::function<nlohmann::json()>& work, std::uint64_t memory_bytes) {
  nlohmann::json reply = {{kChildReplyMarker, 1}};
  try {
    reply["ok"] = work();
  } catch (const std::bad_alloc&) {
    reply["error"] = "it ran out of memory (a plugin's process may take " + std::to_string(memory_bytes >> 20) +
                     " MiB more than the program had; " + kPluginMemoryVar + " sets it)";
  } catch (const std::exception& e) {
    reply["error"] = e.what();
  } catch (...) {
    reply["error"] = "it threw a non-standard exception";
  }
  // Invalid UTF-8 from a plugin is replaced rather than failing the reply.
  write_all(kReplyFd, reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  ::_exit(0);
}

// The address space a process has mapped now, in bytes (0 when /proc cannot tell).
std::uint64_t mapped_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long pages = 0;
  const int n = std::fscanf(f, "%llu", &pages);
  std::fclose(f);
  return n == 1 ? pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

// The children of process `self`, from /proc (each process's parent in its stat line).
std::vector<pid_t> children_of(pid_t self) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end) continue;
    char path[64], buf[512];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    // "pid (comm) state ppid ...": the name may hold spaces and parentheses; the last ')' ends it.
    const char* close = std::strrchr(buf, ')');
    char state = 0;
    long ppid = 0;
    if (close && std::sscanf(close + 1, " %c %ld", &state, &ppid) == 2 && ppid == self)
      out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

// The keeper: the process between the program and the plugin's code. It is a child subreaper
// (Linux PR_SET_CHILD_SUBREAPER), so whatever the plugin starts, even a process that left its
// group with setsid(), becomes its child when its own parent ends; when the worker ends, or the
// program asks it to stop (SIGTERM), it kills every process left below it, then ends as the
// worker did (the same exit status, or the same signal), so the program reads the worker's fate.
[[noreturn]] void keeper_main(const std::function<nlohmann::json()>& work, std::uint64_t memory_bytes,
                              std::uint64_t limit) {
  // A handler of its own (never SIG_IGN, which would reap the worker unseen), so that SIGCHLD
  // stays pending for sigwait.
  ::signal(SIGCHLD, [](int) {});
  sigset_t watched;
  sigemptyset(&watched);
  sigaddset(&watched, SIGTERM);
  sigaddset(&watched, SIGCHLD);
  ::pthread_sigmask(SIG_BLOCK, &watched, nullptr);
#ifdef __linux__
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
  const pid_t keeper = ::getpid();
  const pid_t worker = ::fork();
  if (worker == 0) {
#ifdef __linux__
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (::getppid() != keeper) ::_exit(1);
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
    if (limit > 0) {
      rlimit as{static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
      ::setrlimit(RLIMIT_AS, &as);
    }
    child_main(work, memory_bytes);
  }
  if (worker < 0) ::_exit(1);
  ::setpgid(worker, worker);
  ::close(kReplyFd);  // the program sees the reply end when the worker and its descendants close it
  int worker_status = 0;
  bool worker_done = false;
  while (!worker_done) {
    int sig = 0;
    if (::sigwait(&watched, &sig) != 0) continue;
    if (sig == SIGTERM) break;
    int st = 0;
    pid_t r;
    while ((r = ::waitpid(-1, &st, WNOHANG)) > 0)
      if (r == worker) {
        worker_status = st;
        worker_done = true;
      }
  }
  // Everything left below: the worker's group, then each child (adopted ones included) until
  // there are none; a killed process's own children are adopted and killed in the next round.
  ::kill(-worker, SIGKILL);
  for (int round = 0; round < 1000; ++round) {
    const std::vector<pid_t> kids = children_of(keeper);
    for (pid_t k : kids) ::kill(k, SIGKILL);
    int st = 0;
    pid_t r;
    while ((r = ::waitpid(-1, &st, kids.empty() ? 0 : WNOHANG)) > 0)
      if (r == worker && !worker_done) {
        worker_status = st;
        worker_done = true;
      }
    if (r < 0 && errno == ECHILD) break;
    if (kids.empty()) continue;
    ::usleep(1000);
  }
  if (WIFSIGNALED(worker_status)) {
    const int sig = WTERMSIG(worker_status);
    rlimit none{0, 0};
    ::setrlimit(RLIMIT_CORE, &none);  // the worker's signal, not a second core file
    ::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(sig);
  }
  ::_exit(WIFEXITED(worker_status) ? WEXITSTATUS(worker_status) : 1);
}

// Waits for the child until `deadline`; false when it is still running then.
bool wait_until(pid_t pid, Clock::time_point deadline, int& status) {
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) {  // not ours to wait for (SIGCHLD ignored): gone
      status = 0;
      return true;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

// Stops the keeper: asked first (it kills the worker and everything below it), then, should it
// not end within two seconds, killed with its process group.
void kill_and_reap(pid_t pid, int& status) {
  ::kill(pid, SIGTERM);
  if (wait_until(pid, Clock::now() + std::chrono::seconds(2), status)) return;
  ::kill(-pid, SIGKILL);  // its process group: whatever it started
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

nlohmann::json run_in_child(const std::function<nlohmann::json()>& work, const ChildLimits& limits) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error(std::string("cannot create a pipe for a child process: ") + std::strerror(errno));
  // Keep both ends off 0..2, which the child rewires.
  for (int& fd : fds)
    if (fd <= STDERR_FILENO) {
      int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, kReplyFd);
      ::close(fd);
      fd = moved;
    }
  if (fds[0] < 0 || fds[1] < 0) throw Error("cannot create a pipe for a child process");
  std::fflush(nullptr);  // nothing buffered in the parent's stdio is written twice
  const pid_t parent = ::getpid();
  // The worker's address space: what the program has mapped (the child shares it) plus the limit.
  const std::uint64_t mapped = limits.memory_bytes ? mapped_bytes() : 0;
  const std::uint64_t as_limit = limits.memory_bytes ? mapped + limits.memory_bytes : 0;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits.timeout_s));
  // Not while another thread is inside OpenBLAS (core/util/fork_guard.h).
  std::unique_lock no_blas(fork_guard());
  pid_t pid = ::fork();
  // The child's copy stays locked (unlocking a rwlock another thread id took is undefined), so
  // a plugin that runs BLAS in its child waits there until the time limit stops it.
  if (pid == 0) no_blas.release();
  else no_blas.unlock();
  if (pid < 0) {
    int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(std::string("cannot start a child process: ") + std::strerror(e));
  }
  if (pid == 0) {
    ::close(fds[0]);
    isolate_child(parent, fds[1]);
    keeper_main(work, limits.memory_bytes, as_limit);
  }
  ::setpgid(pid, pid);  // also here, so that a kill of the group cannot miss it
  ::close(fds[1]);

  enum class End { Eof, TimedOut, TooLong, ReadError } end = End::Eof;
  std::string data;
  char buf[1 << 16];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      end = End::TimedOut;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno != EINTR) {
      end = End::ReadError;
      break;
    }
    if (r <= 0) continue;
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      end = End::ReadError;
      break;
    }
    if (n == 0) break;
    if (data.size() + static_cast<std::size_t>(n) > limits.max_reply_bytes) {
      end = End::TooLong;
      break;
    }
    data.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  if (end != End::Eof || !wait_until(pid, deadline, status)) {
    kill_and_reap(pid, status);
    if (end == End::Eof) end = End::TimedOut;
  }

  switch (end) {
    case End::TimedOut:
      throw ChildProcessError("it did not finish within " + seconds(limits.timeout_s) + " s (stopped" +
                  (limits.timeout_hint.empty() ? "" : "; " + limits.timeout_hint) + ")");
    case End::TooLong:
      throw ChildProcessError("it sent more than " + std::to_string(limits.max_reply_bytes) + " bytes (stopped)");
    case End::ReadError:
      throw ChildProcessError("its " + limits.reply_name + " could not be read");
    case End::Eof:
      break;
  }
  if (WIFSIGNALED(status)) throw ChildProcessError("it crashed (" + signal_text(WTERMSIG(status)) + ")");
  if (data.empty()) {
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      throw ChildProcessError("it exited with status " + std::to_string(WEXITSTATUS(status)) + " without replying");
    throw ChildProcessError("it exited without replying");
  }
  return decode_child_reply(data, limits.reply_name);
}

std::uint64_t memory_from_env(const char* var, std::uint64_t fallback) {
  const char* v = std::getenv(var);
  if (!v || !*v) return fallback;
  const std::uint64_t b = parse_bytes(var, v);
  if (b > 0 && b < (std::uint64_t{16} << 20))
    throw ConfigError(var, std::string("expects a size of at least 16MiB (or 0 for no limit), got '") + v + "'");
  return b;
}

double timeout_from_env(const char* var, double fallback) {
  const char* v = std::getenv(var);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  double s = std::strtod(v, &end);
  if (errno != 0 || end == v || *end != '\0' || !std::isfinite(s) || s <= 0 || s > 1e7)
    throw ConfigError(var, std::string("expects a number of seconds above 0 and up to 10000000, got '") + v + "'");
  return s;
}

}  // namespace remat
