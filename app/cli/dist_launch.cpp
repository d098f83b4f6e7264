// `run --tp T --pp P --dp D`: T·P·D processes of this program, one per rank (and with --device
// cuda one GPU per rank), in their own process group; each dies with the launcher
// (PR_SET_PDEATHSIG) and all of them with the first that fails.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "core/trace/output_dir.h"
#include "core/util/error.h"
#include "dist_run.h"

extern char** environ;

namespace fs = std::filesystem;

namespace remat::cli {

namespace {

// This process's own arguments, as the kernel keeps them.
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string a;
  while (std::getline(in, a, '\0')) args.push_back(a);
  if (args.empty()) throw Error("cannot read this program's arguments from /proc/self/cmdline");
  return args;
}

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = true;
  int status = 0;
  int stopped_by = 0;  // the signal that stopped it (SIGSTOP, SIGTSTP, ...), until it continues
};

std::string describe_exit(int rank, int status) {
  const std::string who = "rank " + std::to_string(rank);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return who + " was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return who + " exited with status " + std::to_string(WEXITSTATUS(status));
}

bool failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

// Forks and execs rank r; everything the child does before exec is async-signal-safe.
pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& env, pid_t group) {
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t launcher = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("cannot start a rank: fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, group);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(127);  // the launcher is already gone
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO);  // a rank's output is its run directory
    execve("/proc/self/exe", argv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid, group ? group : pid);  // also here: no window where the child is outside it
  return pid;
}

// Waits for every rank; at the first that fails, gives the others a moment to report (a rank
// killed by a signal is named before one that saw its peer vanish), then stops them all.
std::string wait_ranks(std::vector<Child>& kids, pid_t group) {
  using clock = std::chrono::steady_clock;
  std::optional<clock::time_point> first_failure;
  std::string why;
  auto reap = [&](bool block) {
    for (auto& c : kids) {
      if (!c.running) continue;
      int st = 0;
      const pid_t r = waitpid(c.pid, &st, block ? 0 : WNOHANG | WUNTRACED | WCONTINUED);
      if (r == c.pid && WIFSTOPPED(st)) {
        c.stopped_by = WSTOPSIG(st);  // a stopped rank is the one its peers wait for
        continue;
      }
      if (r == c.pid && WIFCONTINUED(st)) {
        c.stopped_by = 0;
        continue;
      }
      if (r == c.pid || (r < 0 && errno == ECHILD)) {
        c.running = false;
        c.status = r == c.pid ? st : 0;
        if (r == c.pid && failed(st) && !first_failure) first_failure = clock::now();
      }
    }
  };
  for (;;) {
    reap(false);
    bool any = false;
    for (const auto& c : kids) any |= c.running;
    if (!any) break;
    if (interrupt_flag().load()) {
      why = "interrupted";
      break;
    }
    if (first_failure && clock::now() - *first_failure > std::chrono::milliseconds(1500)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<int> stopped;
  const Child* frozen = nullptr;  // a rank stopped by a signal when the others gave up
  for (const auto& c : kids)
    if (c.running) {
      stopped.push_back(c.rank);
      if (c.stopped_by && !frozen) frozen = &c;
    }
  const int frozen_rank = frozen ? frozen->rank : -1, frozen_sig = frozen ? frozen->stopped_by : 0;
  if (!stopped.empty()) kill(-group, SIGKILL);
  reap(true);
  if (!why.empty()) return why;
  const Child* culprit = nullptr;
  for (const auto& c : kids)
    if (WIFSIGNALED(c.status) && std::find(stopped.begin(), stopped.end(), c.rank) == stopped.end()) {
      culprit = &c;
      break;
    }
  if (!culprit)
    for (const auto& c : kids)
      if (failed(c.status) && std::find(stopped.begin(), stopped.end(), c.rank) == stopped.end()) {
        culprit = &c;
        break;
      }
  if (!culprit) return {};
  if (frozen_rank >= 0 && WIFEXITED(culprit->status)) {
    // Its peers waited for it until --dist-timeout and failed: the stopped rank is the cause.
    why = "rank " + std::to_string(frozen_rank) + " was stopped by signal " + std::to_string(frozen_sig) + " (" +
          strsignal(frozen_sig) + ") and did not answer; " + describe_exit(culprit->rank, culprit->status) +
          " after waiting for it";
  } else {
    why = describe_exit(culprit->rank, culprit->status);
  }
  if (!stopped.empty()) {
    why += "; stopped the ranks still running:";
    for (int r : stopped) why += " " + std::to_string(r);
  }
  return why;
}

void print_ranks(const nlohmann::json& j, const std::string& out) {
  std::cout << "parallel         " << j["world_size"].get<int>() << " ranks (tp " << j.value("tp", 1)
            << (j.value("sp", false) ? " sp" : "")
            << (j.value("distribute_saved_activations", false) ? ", distributed checkpoints" : "") << ", dp "
            << j["dp"].get<int>();
  if (j.value("pp", 1) > 1) std::cout << ", pp " << j["pp"].get<int>() << " × " << j.value("micro_batches", 1) << " micro-batches";
  std::cout << "), ZeRO "
            << j["zero"].get<int>() << ", global batch " << j["global_batch"].get<std::int64_t>() << "\n";
  if (j.contains("loss")) {
    std::cout << "loss";
    for (const auto& l : j["loss"]) std::cout << " " << l.get<double>();
    std::cout << "\n";
  }
  for (const auto& r : j["ranks"]) {
    std::cout << "rank " << r["rank"].get<int>() << "           ";
    if (j.value("pp", 1) > 1) std::cout << "stage " << r.value("pp_rank", 0) << ": ";
    if (r.contains("peak_bytes"))
      std::cout << "peak " << human_bytes(r["peak_bytes"].get<std::uint64_t>()) << " (predicted "
                << human_bytes(r.value("predicted_peak_bytes", std::uint64_t{0})) << "), step "
                << r.value("step_time_ms_median", 0.0) << " ms, "
                << human_bytes(r.value("comm_bytes_per_step", std::uint64_t{0})) << " communicated per step";
    else
      std::cout << r.value("status", std::string("?"));
    std::cout << "\n";
  }
  if (!out.empty()) std::cout << "run directory    " << out << "\n";
}

}  // namespace

int launch_ranks(const DistOptions& d, const ModelConfig& global, const TrainOptions& train,
                 const std::string& out, bool force, bool json) {
  replica_model(global, d, d.world(), train);  // refused here, before any process starts
  if (train.device == "cuda") check_cuda_ranks(d.world());
  else check_local_mesh(d, d.world());
  if (!out.empty()) check_output_dir(out, force);
  const fs::path scratch = fs::temp_directory_path() / ("rematlab-dp-" + std::to_string(getpid()));
  std::error_code ec;
  fs::remove_all(scratch, ec);
  fs::create_directories(scratch / "store");
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } cleanup{scratch};
  const std::string target = out.empty() ? (scratch / "run").string() : out;
  const std::string staging = make_temp_dir(target, OutputKind::Ranks);

  const std::vector<std::string> args = own_arguments();
  std::vector<std::string> base;
  for (char** e = environ; *e; ++e) {
    const std::string v = *e;
    const std::string name = v.substr(0, v.find('='));
    if (name == "RANK" || name == "WORLD_SIZE" || name == "LOCAL_RANK" || name.rfind("OMPI_COMM_WORLD_", 0) == 0 ||
        name.rfind("REMAT_RANK", 0) == 0 || name == "REMAT_LOCAL_RANK" ||
        name == "REMAT_WORLD_SIZE" || name == "REMAT_DIST_STORE")
      continue;
    base.push_back(v);
  }
  std::vector<Child> kids;
  pid_t group = 0;
  interrupt_flag();  // Ctrl-C stops the ranks (they are in their own process group)
  try {
    for (int r = 0; r < d.world(); ++r) {
      std::vector<std::string> env = base;
      env.push_back("REMAT_RANK=" + std::to_string(r));
      env.push_back("REMAT_WORLD_SIZE=" + std::to_string(d.world()));
      env.push_back("REMAT_LOCAL_RANK=" + std::to_string(r));  // all on this machine
      env.push_back("REMAT_DIST_STORE=" + (scratch / "store").string());
      env.push_back("REMAT_RANK_OUT=" + rank_out_dir(staging, r));
      Child c;
      c.rank = r;
      c.pid = spawn(args, env, group);
      if (!group) group = c.pid;
      kids.push_back(c);
    }
  } catch (...) {
    if (group) kill(-group, SIGKILL);
    for (auto& c : kids) waitpid(c.pid, nullptr, 0);
    remove_ours(staging);
    throw;
  }
  const std::string failure = wait_ranks(kids, group);
  nlohmann::json j = write_ranks_summary(staging, d.world(), d, global.batch, failure);
  commit_temp_dir(staging, target, force);
  if (json) std::cout << j.dump(2) << "\n";
  else print_ranks(j, out);
  if (!j["complete"].get<bool>())
    return fail("run error: " + j.value("error", std::string("a rank did not complete")));
  return 0;
}

}  // namespace remat::cli
