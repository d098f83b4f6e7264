// Writing a file by the one discipline (output_file.h).
#include "core/util/output_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util/error.h"

namespace fs = std::filesystem;

namespace remat {

namespace {

std::string q(const std::string& p) { return "'" + p + "'"; }

std::string named(const std::string& what, const std::string& path) {
  return (what.empty() ? "" : what + " ") + q(path);
}

const char* kind_of(mode_t m) {
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

std::string parent_of(const std::string& path) {
  const fs::path p = fs::path(path).parent_path();
  return p.empty() ? std::string(".") : p.string();
}

std::string temp_name(const std::string& path) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const fs::path p(path);
  const std::string name = "." + p.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                           std::to_string(rng() % 1000000000);
  return (p.parent_path() / name).string();
}

}  // namespace

std::optional<FileId> file_id(const std::string& path) {
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

void InputFiles::add(const std::string& path, const std::string& what) {
  if (auto id = file_id(path)) files.emplace_back(*id, what);
}

std::string InputFiles::which(const FileId& id) const {
  for (const auto& [f, what] : files)
    if (f == id) return what;
  return {};
}

std::string why_not_writable(const std::string& path, const InputFiles& inputs, const std::string& what) {
  if (path.empty()) return (what.empty() ? std::string("the file name") : what) + " is empty";
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return "cannot write " + named(what, path) + ": " + std::strerror(errno);
  }
  if (!S_ISREG(st.st_mode))
    return named(what, path) + " is " + kind_of(st.st_mode) + "; RematLab replaces only a regular file";
  const FileId id{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
  if (std::string input = inputs.which(id); !input.empty())
    return named(what, path) + " is the " + input + " file this command reads; not writing over it";
  if (st.st_nlink > 1)
    return named(what, path) + " has " + std::to_string(st.st_nlink) +
           " links (a hard link shares its contents with another file); not replacing it";
  return {};
}

void check_writable(const std::string& path, const InputFiles& inputs, const std::string& what) {
  if (std::string why = why_not_writable(path, inputs, what); !why.empty()) throw Error(why);
  struct stat st;
  const std::string dir = parent_of(path);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error("cannot write " + named(what, path) + ": the directory " + q(dir) + " does not exist");
}

OutputFile::OutputFile(std::string path, InputFiles inputs, std::string what)
    : path_(std::move(path)), what_(std::move(what)), inputs_(std::move(inputs)) {
  check_writable(path_, inputs_, what_);
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    tmp_ = temp_name(path_);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) {
    const int err = errno;
    tmp_.clear();
    throw Error("cannot write " + named(what_, path_) + ": cannot create a file in " + q(parent_of(path_)) + ": " +
                std::strerror(err));
  }
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void OutputFile::fail(const std::string& why) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  throw Error(why);
}

void OutputFile::write(const void* data, std::size_t n) {
  if (fd_ < 0) throw Error("cannot write " + named(what_, path_) + ": the file is closed");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, std::min<std::size_t>(n, std::size_t{1} << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("cannot write " + named(what_, path_) + ": " + std::strerror(w < 0 ? errno : EIO));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void OutputFile::commit() {
  if (committed_) return;
  if (fd_ < 0) throw Error("cannot write " + named(what_, path_) + ": the file is closed");
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("cannot write " + named(what_, path_) + ": " + std::strerror(errno));
  // Checked again: something may have taken the name while the file was written.
  if (std::string why = why_not_writable(path_, inputs_, what_); !why.empty()) fail(why);
  struct stat st;
  const bool there = ::lstat(path_.c_str(), &st) == 0;
  int err = 0;
  if (!there) {
    // A name taken between the check and the rename is not replaced blindly: checked again.
    err = ::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE) == 0 ? 0 : errno;
    if (err == EEXIST) {
      if (std::string why = why_not_writable(path_, inputs_, what_); !why.empty()) fail(why);
      err = -1;
    }
    if (err == EINVAL || err == ENOSYS || err == ENOTSUP) err = -1;
  }
  if (there || err == -1) err = ::rename(tmp_.c_str(), path_.c_str()) == 0 ? 0 : errno;
  if (err) fail("cannot write " + named(what_, path_) + ": " + std::strerror(err));
  committed_ = true;
}

void write_output_file(const std::string& path, const std::string& bytes, const InputFiles& inputs,
                       const std::string& what) {
  OutputFile f(path, inputs, what);
  f.write(bytes);
  f.commit();
}

}  // namespace remat
