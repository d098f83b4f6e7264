#include "core/plugin/child_process.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
#include <string.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/fork_guard.h"
#include "core/util/printable.h"

namespace remat {

namespace {

using Clock = std::chrono::steady_clock;

// The reply's marker: a child's reply is {"remat_child_reply": 1, "ok": value} or
// {"remat_child_reply": 1, "error": "message"}.
constexpr const char* kMarker = "remat_child_reply";
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

[[noreturn]] void child_main(const std::function<nlohmann::json()>& work) {
  nlohmann::json reply = {{kMarker, 1}};
  try {
    reply["ok"] = work();
  } catch (const std::exception& e) {
    reply["error"] = e.what();
  } catch (...) {
    reply["error"] = "it threw a non-standard exception";
  }
  // Invalid UTF-8 from a plugin is replaced rather than failing the reply.
  write_all(kReplyFd, reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  ::_exit(0);
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

void kill_and_reap(pid_t pid, int& status) {
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
    child_main(work);
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
  nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains(kMarker) || (!j.contains("ok") && !j.contains("error")))
    throw ChildProcessError("it sent something that is not a " + limits.reply_name + ": '" + printable(data, 60) + "'");
  if (j.contains("error")) {
    const auto& e = j["error"];
    throw Error(e.is_string() ? e.get<std::string>() : e.dump());
  }
  return j["ok"];
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
