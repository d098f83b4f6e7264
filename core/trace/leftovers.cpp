// What interrupted writes leave behind, and whether `clean` may delete it (output_dir.h).
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include "core/trace/output_dir.h"

namespace fs = std::filesystem;

namespace remat {

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

long to_pid(std::string_view s) {
  if (!all_digits(s) || s.size() > 9) return -1;
  return std::stol(std::string(s));
}

// `PID-N` as a pid, or -1.
long pid_and_number(std::string_view rest) {
  const std::size_t dash = rest.find('-');
  if (dash == std::string_view::npos || !all_digits(rest.substr(dash + 1))) return -1;
  return to_pid(rest.substr(0, dash));
}

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

// A regular file with one link, as lstat sees it; empty when it is, else why not.
std::string why_not_lone_file(const fs::path& p, struct stat& st) {
  if (::lstat(p.c_str(), &st) != 0) return "cannot read " + q(p) + ": " + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return q(p) + " is not a regular file";
  if (st.st_nlink > 1)
    return q(p) + " has " + std::to_string(st.st_nlink) + " links, so it is not RematLab's alone";
  return {};
}

// The name of a launcher's rendezvous file: Gloo's keys (decimal hashes, and `.HASH` while
// written), NCCL's unique ids (`PREFIX.nccl-id`, and `PREFIX.nccl-id.tmp.PID` while written).
bool rendezvous_file_name(const std::string& n) {
  if (all_digits(n) || (n.size() > 1 && n[0] == '.' && all_digits(std::string_view(n).substr(1)))) return true;
  const std::size_t at = n.find(".nccl-id");
  if (at == std::string::npos || at == 0) return false;
  const std::string rest = n.substr(at + 8);
  return rest.empty() || (rest.rfind(".tmp.", 0) == 0 && all_digits(std::string_view(rest).substr(5)));
}

std::string why_not_our_scratch(const fs::path& p) {
  std::error_code ec;
  const auto st = fs::symlink_status(p, ec);
  if (fs::is_symlink(st)) return q(p) + " is a symbolic link";
  if (!fs::is_directory(st)) return q(p) + " is not a directory";
  for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path e = it->path();
    const std::string name = e.filename().string();
    if (name == "store" && fs::is_directory(it->symlink_status(ec))) {
      for (fs::directory_iterator s(e, ec); !ec && s != end; s.increment(ec)) {
        struct stat fst;
        if (!rendezvous_file_name(s->path().filename().string()))
          return q(s->path()) + " is not a rendezvous file of RematLab's ranks";
        if (std::string why = why_not_lone_file(s->path(), fst); !why.empty()) return why;
      }
      continue;
    }
    // The run of a launcher without --out (`run`, being written as `.run.tmp-PID-N`).
    if (name == "run" || parse_leftover(e.string())) {
      if (std::string why = why_not_ours(e.string()); !why.empty()) return why;
      continue;
    }
    return q(p) + " holds " + q(name) + ", which a launcher's directory does not hold";
  }
  if (ec) return "cannot read " + q(p) + ": " + ec.message();
  return {};
}

// An old version's weights file being written: empty, or begun as a safetensors file is (the
// header's length, then its JSON object).
std::string why_not_partial_weights(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "cannot read " + q(p) + ": " + std::strerror(errno);
  unsigned char head[9] = {};
  const ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  if (n == 0) return {};
  if (n == 9 && head[8] == '{') return {};
  return q(p) + " does not begin as a safetensors file RematLab writes";
}

}  // namespace

std::optional<Leftover> parse_leftover(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  const std::string name = p.filename().string();
  Leftover l;
  l.path = p.string();
  if (name.rfind("rematlab-dp-", 0) == 0) {
    l.kind = Leftover::Kind::Scratch;
    l.pid = to_pid(std::string_view(name).substr(12));
    if (l.pid > 0) return l;
    return std::nullopt;
  }
  // `.NAME.tmp-PID-N` and `.NAME.old-PID-N`: a directory, or (tmp) a file being written.
  if (name.size() >= 2 && name[0] == '.') {
    for (const char* what : {".tmp-", ".old-"}) {
      const std::size_t at = name.rfind(what);
      if (at == std::string::npos || at < 2) continue;
      const long pid = pid_and_number(std::string_view(name).substr(at + 5));
      if (pid < 0) continue;
      l.target = (p.parent_path() / name.substr(1, at - 1)).string();
      l.pid = pid;
      std::error_code ec;
      l.kind = std::string(what) == ".tmp-" && fs::is_regular_file(fs::symlink_status(p, ec)) ? Leftover::Kind::File
                                                                                            : Leftover::Kind::Dir;
      return l;
    }
  }
  // Earlier versions' files: `NAME.tmp-PID` of an output directory's file, `NAME.partial-PID[-K]`.
  if (std::size_t at = name.rfind(".tmp-"); at != std::string::npos && at > 0 &&
                                            is_output_file_name(name.substr(0, at))) {
    l.pid = to_pid(std::string_view(name).substr(at + 5));
    if (l.pid > 0) {
      l.kind = Leftover::Kind::File;
      l.target = (p.parent_path() / name.substr(0, at)).string();
      return l;
    }
  }
  if (std::size_t at = name.rfind(".partial-"); at != std::string::npos && at > 0) {
    std::string_view rest = std::string_view(name).substr(at + 9);
    const std::size_t dash = rest.find('-');
    if (dash != std::string_view::npos && all_digits(rest.substr(dash + 1))) rest = rest.substr(0, dash);
    l.pid = to_pid(rest);
    if (l.pid > 0) {
      l.kind = Leftover::Kind::File;
      l.target = (p.parent_path() / name.substr(0, at)).string();
      return l;
    }
  }
  return std::nullopt;
}

std::vector<Leftover> leftovers_in(const std::string& dir) {
  std::vector<Leftover> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (auto l = parse_leftover(it->path().string())) out.push_back(*l);
  std::sort(out.begin(), out.end(), [](const Leftover& a, const Leftover& b) { return a.path < b.path; });
  return out;
}

std::vector<Leftover> leftovers_around(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  std::vector<Leftover> out;
  if (!p.empty() && p != "." && p != ".." && p.filename() != "..")
    for (auto& l : leftovers_in(p.parent_path().empty() ? "." : p.parent_path().string()))
      if (!l.target.empty() && fs::path(l.target).filename() == p.filename()) out.push_back(l);
  std::error_code ec;
  if (fs::is_directory(fs::symlink_status(p, ec)))
    for (auto& l : leftovers_in(dir)) out.push_back(l);
  return out;
}

bool process_alive(long pid) {
  if (pid <= 0 || pid > 0x3fffffff) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

std::string why_keep(const Leftover& l) {
  if (process_alive(l.pid)) return "process " + std::to_string(l.pid) + ", which wrote it, is still running";
  switch (l.kind) {
    case Leftover::Kind::Dir:
      return why_not_ours(l.path);
    case Leftover::Kind::Scratch:
      return why_not_our_scratch(l.path);
    case Leftover::Kind::File: {
      struct stat st;
      if (std::string why = why_not_lone_file(l.path, st); !why.empty()) return why;
      if (l.path.find(".partial-") != std::string::npos) return why_not_partial_weights(l.path);
      return {};
    }
  }
  return {};
}

void remove_leftover(const Leftover& l) {
  std::error_code ec;
  switch (l.kind) {
    case Leftover::Kind::Dir:
      remove_ours(l.path);
      return;
    case Leftover::Kind::File:
      fs::remove(l.path, ec);
      return;
    case Leftover::Kind::Scratch: {
      const fs::path p(l.path);
      for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->path().filename() == "store") {
          fs::remove_all(it->path(), ec);  // checked by why_keep: rendezvous files only
          continue;
        }
        remove_ours(it->path().string());
      }
      fs::remove(p, ec);
      return;
    }
  }
}

std::string describe(const Leftover& l) {
  const std::string state = process_alive(l.pid) ? ", still running" : ", no longer running";
  if (l.kind == Leftover::Kind::Scratch)
    return "'" + l.path + "' is the rendezvous directory of ranks started by process " + std::to_string(l.pid) + state +
           "; `rematlab-batch clean` removes it";
  return "'" + l.path + "' is left over from an interrupted write of '" + l.target + "' (process " +
         std::to_string(l.pid) + state + "); `rematlab-batch clean` removes it";
}

}  // namespace remat
