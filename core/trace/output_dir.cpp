// Ownership of output directories, and moving a finished one into place (output_dir.h).
#include "core/trace/output_dir.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/trace/run_dir.h"
#include "core/trace/trace.h"
#include "core/util/error.h"
#include "core/util/json_io.h"

namespace fs = std::filesystem;

namespace remat {

namespace {

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The files each kind of directory holds (besides the marker and, for a sweep, its runs). A run
// recorded in PyTorch (python/rematlab/run_writer.py) also holds its own tables and, on CUDA,
// the allocator's snapshot (docs/trace-format.md, "Recorded in PyTorch").
const std::vector<std::string>& files_of(OutputKind kind) {
  static const std::vector<std::string> run = [] {
    std::vector<std::string> f = {kSummaryFile, kScheduleFile, kChromeTraceFile};
    for (const auto& t : csv_table_files()) f.push_back(t);
    for (const char* r : {"saved_tensors.csv", "module_calls.csv", "op_outputs.csv", "cuda_memory_snapshot.pickle"})
      f.push_back(r);
    return f;
  }();
  static const std::vector<std::string> sweep = {schema::kSweepFile, kComparisonFile};
  // A ranks directory: also the trace of all its ranks that `export` writes there.
  static const std::vector<std::string> ranks = {schema::kRanksFile, kChromeTraceFile};
  return kind == OutputKind::Run ? run : kind == OutputKind::Sweep ? sweep : ranks;
}

// `PID-N` or, with `bare_pid`, also `PID`.
bool pid_suffix(std::string_view s, bool bare_pid) {
  const std::size_t dash = s.find('-');
  if (dash == std::string_view::npos) return bare_pid && all_digits(s);
  return all_digits(s.substr(0, dash)) && all_digits(s.substr(dash + 1));
}

// One of those files, or the temporary file of one being written: `.NAME.tmp-PID-N`
// (output_file.h), or `NAME.tmp-PID` of earlier versions.
bool holds_file(OutputKind kind, const std::string& name) {
  if (name == kWritingMarkerFile) return true;
  for (const auto& f : files_of(kind)) {
    if (name == f) return true;
    for (const std::string& tmp : {"." + f + ".tmp-", f + ".tmp-"})
      if (name.size() > tmp.size() && name.compare(0, tmp.size(), tmp) == 0 &&
          pid_suffix(std::string_view(name).substr(tmp.size()), tmp[0] != '.'))
        return true;
  }
  return false;
}

const char* kind_name(OutputKind k) {
  return k == OutputKind::Run ? "run" : k == OutputKind::Sweep ? "sweep" : "ranks";
}
const char* format_of(OutputKind k) {
  return k == OutputKind::Run ? schema::kRunFormat : k == OutputKind::Sweep ? schema::kSweepFormat : schema::kRanksFormat;
}
int max_version(OutputKind k) {
  return k == OutputKind::Run ? kTraceFormatVersion
         : k == OutputKind::Sweep ? schema::kSweepFormatVersion : schema::kRanksFormatVersion;
}
// The summary file naming a directory's kind.
const char* kind_file(OutputKind k) {
  return k == OutputKind::Run ? kSummaryFile : k == OutputKind::Sweep ? schema::kSweepFile : schema::kRanksFile;
}
std::optional<OutputKind> kind_by_file(const fs::path& p);

// Why `file` does not say it belongs to a RematLab directory of `kind`; empty when it does. The
// summary and sweep files also say whether the run or sweep completed; the marker does not.
std::string why_not_our_file(const fs::path& file, OutputKind kind, bool needs_complete) {
  const std::string what = std::string("a RematLab ") + kind_name(kind) + " summary";
  nlohmann::json j;
  try {
    j = read_json_file(file.string());  // a regular file, bounded: never waits on a FIFO
  } catch (const Error& e) {
    return std::string(e.what()) + ", so not " + what;
  }
  if (!j.is_object()) return q(file) + " is not a JSON object, so not " + what;
  auto f = j.find("format");
  if (f == j.end() || !f->is_string() || f->get<std::string>() != format_of(kind))
    return q(file) + " is not " + what + " (its \"format\" is not \"" + format_of(kind) + "\")";
  auto v = j.find("format_version");
  if (v == j.end() || !v->is_number_integer()) return q(file) + " has no integer \"format_version\"";
  // Compared as read (a version past 2^63 is unsigned) and quoted as written.
  const auto max = static_cast<std::uint64_t>(max_version(kind));
  const bool known = v->is_number_unsigned() ? v->get<std::uint64_t>() >= 1 && v->get<std::uint64_t>() <= max
                                             : v->get<std::int64_t>() >= 1 && v->get<std::int64_t>() <= max_version(kind);
  if (!known)
    return q(file) + " has format version " + v->dump() + ", this program knows 1 to " +
           std::to_string(max_version(kind)) + " (written by a newer RematLab?)";
  if (needs_complete) {
    auto c = j.find("complete");
    if (c == j.end() || !c->is_boolean()) return q(file) + " has no \"complete\" flag, so not " + what;
  }
  return {};
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(fs::symlink_status(p, ec));
}

std::string why_not_ours(const fs::path& p, std::optional<OutputKind> must_be) {
  std::error_code ec;
  const auto st = fs::symlink_status(p, ec);
  if (!fs::exists(st)) return q(p) + " does not exist";
  if (fs::is_symlink(st)) return q(p) + " is a symbolic link";
  if (!fs::is_directory(st)) return q(p) + " is not a directory";
  const bool marker = is_file(p / kWritingMarkerFile);
  int summaries = 0;
  for (OutputKind k : {OutputKind::Run, OutputKind::Sweep, OutputKind::Ranks}) summaries += is_file(p / kind_file(k));
  if (summaries > 1) return q(p) + " holds more than one of " + kSummaryFile + ", " + schema::kSweepFile + " and " + schema::kRanksFile;
  std::optional<OutputKind> kind = kind_by_file(p);
  const bool summary = kind.has_value();
  if (!kind && marker) {
    // Being written: the marker says what.
    for (OutputKind k : {OutputKind::Run, OutputKind::Sweep, OutputKind::Ranks})
      if (why_not_our_file(p / kWritingMarkerFile, k, false).empty()) kind = k;
    if (!kind) return why_not_our_file(p / kWritingMarkerFile, must_be.value_or(OutputKind::Run), false);
  }
  if (kind && must_be && *kind != *must_be)
    return q(p) + " is a " + kind_name(*kind) + " directory where a " + kind_name(*must_be) + " directory belongs";
  fs::directory_iterator it(p, ec), end;
  if (ec) return "cannot read " + q(p) + ": " + ec.message();
  if (!kind) {
    if (it == end) return {};  // empty: nothing to lose
    return q(p) + " holds " + q(it->path().filename()) + " and neither " + kSummaryFile + " nor " + schema::kSweepFile +
           ", so it is not a RematLab run or sweep directory";
  }
  // First what it holds (a stray file is named even when the summary is not ours either)...
  for (; it != end; it.increment(ec)) {
    const fs::path e = it->path();
    const std::string name = e.filename().string();
    const auto est = it->symlink_status(ec);
    if (fs::is_regular_file(est) && holds_file(*kind, name)) {
      // Another name shares this file's contents (a hard link): deleting or rewriting the
      // directory would reach a file that is not only ours.
      const auto links = fs::hard_link_count(e, ec);
      if (ec) return "cannot read " + q(e) + ": " + ec.message();
      if (links > 1)
        return q(e) + " has " + std::to_string(links) +
               " links (a hard link shares its contents with another file), so it is not RematLab's alone";
      continue;
    }
    if ((*kind == OutputKind::Sweep || *kind == OutputKind::Ranks) && !must_be && fs::is_directory(est)) {
      std::string why = why_not_ours(e, OutputKind::Run);  // a run of the sweep or a rank's, or one being written
      if (!why.empty()) return why;
      continue;
    }
    return q(p) + " holds " + q(name) + ", which a RematLab " + kind_name(*kind) + " directory does not hold";
  }
  if (ec) return "cannot read " + q(p) + ": " + ec.message();
  // ...then that its files are ours, with a version this program knows.
  if (summary) return why_not_our_file(p / kind_file(*kind), *kind, true);
  return {};
}

std::optional<OutputKind> kind_by_file(const fs::path& p) {
  for (OutputKind k : {OutputKind::Run, OutputKind::Sweep, OutputKind::Ranks})
    if (is_file(p / kind_file(k))) return k;
  return std::nullopt;
}

fs::path normal_target(const std::string& dir) {
  if (dir.empty()) throw Error("the output directory name is empty");
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  if (p.empty() || p == "." || p == ".." || p.filename() == "..")
    throw Error("'" + dir + "' cannot be used as an output directory");
  return p;
}

fs::path parent_of(const fs::path& p) { return p.parent_path().empty() ? fs::path(".") : p.parent_path(); }

std::string random_suffix() {
  static std::random_device rd;
  return std::to_string(::getpid()) + "-" + std::to_string(rd() % 1000000);
}

// A new empty directory `.NAME.WHAT-PID-N` next to `p`.
fs::path make_hidden_dir(const fs::path& p, const char* what, const std::string& dir) {
  const fs::path parent = parent_of(p);
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw Error("cannot write '" + dir + "': cannot create " + q(parent) + ": " + ec.message());
  for (int attempt = 0; attempt < 16; ++attempt) {
    fs::path tmp = parent / ("." + p.filename().string() + "." + what + "-" + random_suffix());
    if (fs::create_directory(tmp, ec)) return tmp;
    if (ec && ec != std::errc::file_exists)
      throw Error("cannot write '" + dir + "': cannot create a directory in " + q(parent) + ": " + ec.message());
  }
  throw Error("cannot make a temporary directory next to '" + dir + "'");
}

// ------------------------------------------------------------------ moving into place

// The parent directory, open, so that every rename names entries of the same directory.
class Parent {
 public:
  // `p` as the user named it: empty for the current directory.
  explicit Parent(const fs::path& p) : path_(p) {
    const fs::path at = p.empty() ? fs::path(".") : p;
    fd_ = ::open(at.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0) throw Error("cannot open " + q(at) + ": " + std::strerror(errno));
  }
  ~Parent() { ::close(fd_); }
  Parent(const Parent&) = delete;
  Parent& operator=(const Parent&) = delete;
  // 0 or the errno of renameat2 / renameat (flags 0: the plain rename).
  int rename(const std::string& from, const std::string& to, unsigned flags) const {
    int rc = flags ? ::renameat2(fd_, from.c_str(), fd_, to.c_str(), flags)
                   : ::renameat(fd_, from.c_str(), fd_, to.c_str());
    return rc == 0 ? 0 : errno;
  }
  bool exists(const std::string& name) const {
    struct stat st;
    return ::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
  }
  fs::path operator/(const std::string& name) const { return path_.empty() ? fs::path(name) : path_ / name; }

 private:
  fs::path path_;
  int fd_ = -1;
};

bool unsupported(int err) { return err == EINVAL || err == ENOSYS || err == ENOTSUP; }
bool taken(int err) { return err == EEXIST || err == ENOTEMPTY || err == ENOTDIR || err == EISDIR; }

class Commit {
 public:
  Commit(const fs::path& tmp, const fs::path& target, bool force, const CommitSeams& s)
      : parent_(target.parent_path()), tmp_(tmp.filename().string()), name_(target.filename().string()),
        dir_(target.string()), force_(force), two_step_(s.two_step), hook_(s.before_rename) {
    if (parent_of(tmp).lexically_normal() != parent_of(target).lexically_normal())
      throw Error("'" + tmp.string() + "' is not next to '" + dir_ + "'");
  }

  void run() {
    if (!parent_.exists(name_)) return place_new();
    if (!force_) keep("'" + dir_ + "' appeared while this was being written and was not replaced");
    if (std::string why = why_not_ours(parent_ / name_, std::nullopt); !why.empty())
      keep("'" + dir_ + "' changed while this was being written and is not replaced: " + why);
    if (two_step_) return replace_in_two_steps();
    before_move();
    int err = parent_.rename(tmp_, name_, RENAME_EXCHANGE);
    if (err == ENOENT) return place_new();
    if (unsupported(err)) {
      two_step_ = true;
      return replace_in_two_steps();
    }
    if (err) keep("cannot replace '" + dir_ + "': " + std::strerror(err));
    // The old contents are at the temporary name now: delete them only if they are still ours.
    if (std::string why = why_not_ours(parent_ / tmp_, std::nullopt); !why.empty()) {
      if (int back = parent_.rename(tmp_, name_, RENAME_EXCHANGE))
        throw Error("'" + dir_ + "' changed while it was being replaced (" + why + "); it is now at '" +
                    (parent_ / tmp_).string() + "' and the result at '" + dir_ + "' (" + std::strerror(back) + ")");
      keep("'" + dir_ + "' changed while it was being replaced and was put back: " + why);
    }
    remove_old(parent_ / tmp_);
  }

 private:
  // The target is free: a rename that never replaces anything.
  void place_new() {
    before_move();
    if (!two_step_) {
      int err = parent_.rename(tmp_, name_, RENAME_NOREPLACE);
      if (err == 0) return;
      if (err == EEXIST) keep("'" + dir_ + "' appeared while this was being written and was not replaced");
      if (!unsupported(err)) keep("cannot write '" + dir_ + "': " + std::strerror(err));
      two_step_ = true;
    }
    // Without RENAME_NOREPLACE: checked first; a directory created between the check and the
    // rename makes it fail unless it is empty (then it is replaced, with nothing in it lost).
    if (int err = checked_rename(tmp_, name_)) {
      if (taken(err)) keep("'" + dir_ + "' appeared while this was being written and was not replaced");
      keep("cannot write '" + dir_ + "': " + std::strerror(err));
    }
  }

  int checked_rename(const std::string& from, const std::string& to) const {
    if (parent_.exists(to)) return EEXIST;
    return parent_.rename(from, to, 0);
  }

  void replace_in_two_steps() {
    std::string old;
    for (int attempt = 0; attempt < 16 && old.empty(); ++attempt) {
      std::string cand = "." + name_ + ".old-" + random_suffix();
      if (!parent_.exists(cand)) old = cand;
    }
    if (old.empty()) keep("cannot find a free name next to '" + dir_ + "'");
    before_move();
    if (int err = checked_rename(name_, old)) {
      if (err == ENOENT) return place_new();
      keep("cannot move '" + dir_ + "' aside: " + std::strerror(err));
    }
    if (std::string why = why_not_ours(parent_ / old, std::nullopt); !why.empty()) {
      int back = checked_rename(old, name_);
      keep("'" + dir_ + "' changed while it was being replaced and was " +
           (back ? "left at '" + (parent_ / old).string() + "'" : std::string("put back")) + ": " + why);
    }
    if (int err = checked_rename(tmp_, name_)) {
      if (taken(err)) {
        keep("'" + dir_ + "' appeared while it was being replaced; the old directory is at '" +
             (parent_ / old).string() + "'");
      }
      int back = checked_rename(old, name_);
      keep("cannot write '" + dir_ + "': " + std::strerror(err) +
           (back ? "; the old directory is at '" + (parent_ / old).string() + "'" : std::string()));
    }
    remove_old(parent_ / old);
  }

  // The tests' seam: once, right before the first rename that moves anything.
  void before_move() {
    if (!hook_) return;
    auto h = std::move(hook_);
    hook_ = nullptr;
    h();
  }

  static void remove_old(const fs::path& old) { remove_ours(old.string()); }

  // The result stays, under a name of its own that nothing else has.
  [[noreturn]] void keep(const std::string& why) {
    for (int k = 2; k < 1000; ++k) {
      const std::string cand = name_ + "-" + std::to_string(k);
      int err = two_step_ ? checked_rename(tmp_, cand) : parent_.rename(tmp_, cand, RENAME_NOREPLACE);
      if (unsupported(err) && !two_step_) err = checked_rename(tmp_, cand);
      if (err == 0) throw Error(why + "; the result is kept in '" + (parent_ / cand).string() + "'");
      if (!taken(err)) break;
    }
    throw Error(why + "; the result is left in '" + (parent_ / tmp_).string() + "'");
  }

  Parent parent_;
  std::string tmp_, name_, dir_;
  bool force_, two_step_;
  std::function<void()> hook_;
};

}  // namespace

std::string why_not_ours(const std::string& dir) { return why_not_ours(fs::path(dir), std::nullopt); }

bool is_output_file_name(const std::string& name) {
  for (OutputKind k : {OutputKind::Run, OutputKind::Sweep, OutputKind::Ranks})
    for (const auto& f : files_of(k))
      if (f == name) return true;
  return false;
}

void remove_ours(const std::string& dir) {
  const fs::path p(dir);
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(p, ec))) return;
  // Marked first, so that what an interruption leaves half deleted is still recognisably ours.
  // The marker is a new file: an old one is unlinked, never written through (were it a link
  // to someone's file, that file would change).
  const std::optional<OutputKind> kind = kind_by_file(p);
  if (kind) {
    const std::string marker = (p / kWritingMarkerFile).string();
    ::unlink(marker.c_str());
    const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) {
      const std::string text =
          nlohmann::json({{"format", format_of(*kind)}, {"format_version", max_version(*kind)}}).dump() + "\n";
      [[maybe_unused]] const ssize_t n = ::write(fd, text.data(), text.size());
      ::close(fd);
    }
  }
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename() != kWritingMarkerFile) entries.push_back(it->path());
  for (const auto& e : entries) {
    if (fs::is_directory(fs::symlink_status(e, ec))) remove_ours(e.string());
    else fs::remove(e, ec);
  }
  fs::remove(p / kWritingMarkerFile, ec);
  fs::remove(p, ec);  // what fails stays as a leftover that `clean` recognises
}

void check_output_dir(const std::string& dir, bool force) {
  fs::path p = normal_target(dir);
  std::error_code ec;
  auto st = fs::symlink_status(p, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st))
      throw Error("'" + dir + "' exists and is not a directory; refusing to replace it even with --force");
    if (!force) throw Error("'" + dir + "' exists; use --force to replace it");
    if (std::string why = why_not_ours(p, std::nullopt); !why.empty())
      throw Error("'" + dir + "' is not a RematLab run or sweep directory (" + why +
                  "); refusing to replace it even with --force");
  }
  // The parent must exist (or be creatable) and take a new directory.
  fs::remove(make_hidden_dir(p, "tmp", dir), ec);
}

std::string make_temp_dir(const std::string& dir, OutputKind kind) {
  fs::path tmp = make_hidden_dir(normal_target(dir), "tmp", dir);
  const nlohmann::json marker = {{"format", format_of(kind)}, {"format_version", max_version(kind)}};
  std::ofstream out(tmp / kWritingMarkerFile, std::ios::binary);
  out << marker.dump() << "\n";
  out.close();
  if (!out) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw Error("cannot write '" + dir + "': cannot write in " + q(tmp));
  }
  return tmp.string();
}

void commit_temp_dir(const std::string& tmp, const std::string& dir, bool force, const CommitSeams& seams) {
  fs::path p = normal_target(dir);
  // Complete now: the marker goes, so that from here the directory speaks for itself.
  if (::unlink((fs::path(tmp) / kWritingMarkerFile).c_str()) != 0 && errno != ENOENT)
    throw Error("cannot write '" + dir + "': cannot remove the marker in '" + tmp + "': " + std::strerror(errno));
  Commit(fs::path(tmp), p, force, seams).run();
}

}  // namespace remat
