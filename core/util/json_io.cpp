#include "core/util/json_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "core/util/error.h"
#include "core/util/host_memory.h"

namespace remat {

namespace {

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};


std::string human_bytes(std::uint64_t b) {
  if (b >= (std::uint64_t{1} << 30)) return std::to_string(b >> 30) + " GiB";
  if (b >= (std::uint64_t{1} << 20)) return std::to_string(b >> 20) + " MiB";
  return std::to_string(b) + " bytes";
}

}  // namespace

// Opens without blocking (a FIFO would block a plain open) and checks the type on the open file.
int open_regular_file(const std::string& path, struct stat& st) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) throw Error(path + ": missing");
    throw Error(path + ": cannot be read (" + std::strerror(e) + ")");
  }
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error(path + ": cannot be read (" + std::strerror(e) + ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": is " + kind_of(st.st_mode) + ", expected a regular file");
  }
  return fd;
}

void require_file_size_at_most(const std::string& path, std::uint64_t size, std::uint64_t max_bytes) {
  if (size > max_bytes)
    throw LimitError(path + ": " + human_bytes(size) + " is larger than the " + human_bytes(max_bytes) +
                     " this reader accepts");
}

void require_regular_file(const std::string& path) {
  struct stat st {};
  Fd fd(open_regular_file(path, st));
}

std::string read_regular_file(const std::string& path, std::uint64_t max_bytes) {
  struct stat st {};
  Fd fd(open_regular_file(path, st));
  auto size = static_cast<std::uint64_t>(st.st_size);
  require_file_size_at_most(path, size, max_bytes);
  // Refused before allocating when the host cannot hold it (an allocation past that may be
  // granted by overcommit and then kill the process as it fills).
  const std::uint64_t avail = host_memory_available();
  if (avail > 0 && size > avail)
    throw LimitError(path + ": " + human_bytes(size) + " does not fit in memory (" + human_bytes(avail) +
                     " available)");
  std::string out;
  try {
    out.resize(size);
  } catch (const std::bad_alloc&) {
    throw LimitError(path + ": " + human_bytes(size) + " does not fit in memory");
  }
  std::size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path + ": cannot be read (" + std::strerror(errno) + ")");
    if (n == 0) break;  // shrank while reading
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json(read_regular_file(path, limits::kJsonFileBytes), path);
}

std::string json_snippet(const nlohmann::json& v) {
  constexpr std::size_t kMax = 80;
  // Depth is bounded by parse_json, so dump() cannot run out of stack on what a user gave us.
  std::string d = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (d.size() <= kMax) return d;
  std::string what = v.is_array()    ? "an array of " + std::to_string(v.size()) + " elements"
                     : v.is_object() ? "an object of " + std::to_string(v.size()) + " fields"
                     : v.is_string() ? std::to_string(v.get_ref<const std::string&>().size()) + " characters"
                                     : std::to_string(d.size()) + " characters";
  return d.substr(0, kMax) + "... (" + what + ")";
}

std::string json_string(const nlohmann::json& j, const char* key, const std::string& fallback, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_string()) throw Error(where + ": field '" + key + "' must be a string, got " + json_snippet(*it));
  return it->get<std::string>();
}

bool json_string_is(const nlohmann::json& j, const char* key, std::string_view expected) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() && it->get_ref<const std::string&>() == expected;
}

int json_int(const nlohmann::json& v, const std::string& field) {
  if (!v.is_number_integer()) throw ConfigError(field, "must be an integer, got " + json_snippet(v));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<long long>::max()))
    throw ConfigError(field, "is out of range: " + v.dump());
  return checked_narrow<int>(v.get<long long>(), field);
}

bool json_bool(const nlohmann::json& v, const std::string& field) {
  if (!v.is_boolean()) throw ConfigError(field, "must be true or false, got " + json_snippet(v));
  return v.get<bool>();
}

double json_number(const nlohmann::json& v, const std::string& field) {
  if (!v.is_number()) throw ConfigError(field, "must be a number, got " + json_snippet(v));
  return v.get<double>();
}

}  // namespace remat
