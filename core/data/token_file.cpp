#include "core/data/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/util/error.h"
#include "core/util/json_io.h"
#include "core/util/limits.h"
#include "core/util/output_file.h"

namespace remat {

namespace {

struct DTypeInfo {
  TokenDType t;
  const char* name;
  const char* npy;  // NumPy descr
  std::size_t bytes;
};
constexpr std::array<DTypeInfo, 7> kDTypes = {{{TokenDType::U8, "u8", "|u1", 1},
                                               {TokenDType::U16, "u16", "<u2", 2},
                                               {TokenDType::I16, "i16", "<i2", 2},
                                               {TokenDType::U32, "u32", "<u4", 4},
                                               {TokenDType::I32, "i32", "<i4", 4},
                                               {TokenDType::I64, "i64", "<i8", 8},
                                               {TokenDType::U64, "u64", "<u8", 8}}};

const DTypeInfo& info(TokenDType t) {
  for (const auto& d : kDTypes)
    if (d.t == t) return d;
  return kDTypes[1];
}

std::string known_dtypes() {
  std::string s;
  for (const auto& d : kDTypes) s += (s.empty() ? "" : " | ") + std::string(d.name);
  return s;
}

// The value of 'key' in a .npy header dict, up to the next top-level ',' or '}' (a shape's
// parenthesised tuple kept whole).
std::string npy_field(const std::string& header, const std::string& key, const std::string& file) {
  const std::string k = "'" + key + "'";
  auto p = header.find(k);
  if (p == std::string::npos) throw Error(file + ": the .npy header has no '" + key + "'");
  p = header.find(':', p + k.size());
  if (p == std::string::npos) throw Error(file + ": malformed .npy header");
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  std::size_t e = p;
  int depth = 0;
  while (e < header.size() && !(depth == 0 && (header[e] == ',' || header[e] == '}'))) {
    if (header[e] == '(') ++depth;
    if (header[e] == ')') --depth;
    ++e;
  }
  std::string v = header.substr(p, e - p);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

}  // namespace

TokenDType token_dtype_from_string(const std::string& s) {
  for (const auto& d : kDTypes)
    if (s == d.name) return d.t;
  throw ConfigError("tokens-dtype", "unknown token dtype '" + s + "' (" + known_dtypes() + ")");
}

const char* to_string(TokenDType t) { return info(t).name; }

namespace {

// Reads n bytes at `offset` of `fd` (fewer only at the end of the file).
std::size_t read_at(int fd, void* out, std::size_t n, std::uint64_t offset, const std::string& path) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, static_cast<char*>(out) + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(path + ": cannot be read (" + std::strerror(errno) + ")");
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

}  // namespace

std::shared_ptr<const TokenFile> TokenFile::open(const std::string& path, const std::string& dtype) {
  struct stat st {};
  const int fd = open_regular_file(path, st);
  std::shared_ptr<TokenFile> f(new TokenFile);
  f->fd_ = fd;  // closed by the destructor, also when a check below throws
  f->path_ = path;
  f->file_bytes_ = static_cast<std::uint64_t>(st.st_size);
  if (f->file_bytes_ == 0) throw Error(path + ": the token file is empty");
  unsigned char head[12] = {};
  const std::size_t head_n = read_at(fd, head, sizeof head, 0, path);
  const unsigned char* bytes = head;
  std::uint64_t offset = 0;
  const bool npy = head_n >= 10 && std::memcmp(bytes, "\x93NUMPY", 6) == 0;
  if (npy) {
    const int major = bytes[6];
    std::size_t hlen = 0, hstart = 0;
    if (major == 1) {
      hlen = bytes[8] | (std::size_t{bytes[9]} << 8);
      hstart = 10;
    } else if (major == 2 || major == 3) {
      if (head_n < 12) throw Error(path + ": truncated .npy header");
      hlen = bytes[8] | (std::size_t{bytes[9]} << 8) | (std::size_t{bytes[10]} << 16) |
             (std::size_t{bytes[11]} << 24);
      hstart = 12;
    } else {
      throw Error(path + ": .npy format version " + std::to_string(major) + " is not one this reader knows (1-3)");
    }
    if (hlen > f->file_bytes_ - hstart || hlen > limits::kJsonFileBytes) throw Error(path + ": truncated .npy header");
    std::string header(hlen, '\0');
    if (read_at(fd, header.data(), hlen, hstart, path) != hlen) throw Error(path + ": truncated .npy header");
    std::string descr = npy_field(header, "descr", path);
    if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"'))
      throw Error(path + ": the .npy dtype " + descr + " is not a simple integer type");
    descr = descr.substr(1, descr.size() - 2);
    if (descr == "<u1" || descr == "=u1") descr = "|u1";
    bool found = false;
    for (const auto& d : kDTypes)
      if (descr == d.npy) {
        f->dtype_ = d.t;
        found = true;
      }
    if (!found)
      throw Error(path + ": .npy dtype '" + descr + "' is not a little-endian integer type this reader takes "
                  "(|u1, <u2, <i2, <u4, <i4, <i8, <u8)");
    if (!dtype.empty() && token_dtype_from_string(dtype) != f->dtype_)
      throw ConfigError("tokens-dtype", "'" + dtype + "' disagrees with the .npy file's own dtype (" +
                                            to_string(f->dtype_) + ")");
    if (npy_field(header, "fortran_order", path) != "False")
      throw Error(path + ": Fortran-ordered .npy arrays are not read; save it C-ordered");
    const std::string shape = npy_field(header, "shape", path);
    std::uint64_t count = 1;
    std::string num;
    for (char c : shape + ",") {
      if (c >= '0' && c <= '9') {
        num += c;
      } else if (c == ',' || c == ')') {
        if (!num.empty()) {
          if (num.size() > 18) throw Error(path + ": .npy shape " + shape + " is too large");
          const std::uint64_t dim = std::stoull(num);
          if (dim != 0 && count > std::numeric_limits<std::uint64_t>::max() / dim)
            throw Error(path + ": .npy shape " + shape + " is too large");
          count *= dim;
        }
        num.clear();
      } else if (c != '(' && c != ' ') {
        throw Error(path + ": malformed .npy shape " + shape);
      }
    }
    offset = hstart + hlen;
    const std::size_t esz = info(f->dtype_).bytes;
    if (count > (f->file_bytes_ - offset) / esz)
      throw Error(path + ": the .npy array of shape " + shape + " is longer than the file (truncated?)");
    f->count_ = count;
  } else {
    if (path.ends_with(".npy")) throw Error(path + ": not a .npy file (no \\x93NUMPY magic)");
    f->dtype_ = dtype.empty() ? TokenDType::U16 : token_dtype_from_string(dtype);
    const std::size_t esz = info(f->dtype_).bytes;
    if (f->file_bytes_ % esz != 0)
      throw Error(path + ": " + std::to_string(f->file_bytes_) + " bytes is not a whole number of " +
                  to_string(f->dtype_) + " tokens (is --tokens-dtype right?)");
    f->count_ = f->file_bytes_ / esz;
  }
  f->data_offset_ = offset;
  return f;
}

TokenFile::~TokenFile() {
  if (fd_ >= 0) ::close(fd_);
}

void TokenFile::read(std::uint64_t first, std::size_t n, std::vector<std::int64_t>& out) const {
  const std::size_t esz = info(dtype_).bytes;
  out.resize(n);
  if (first > count_ || n > count_ - first)
    throw Error(path_ + ": tokens " + std::to_string(first) + " to " + std::to_string(first + n) +
                " lie past its " + std::to_string(count_) + " tokens");
  std::vector<unsigned char> raw(n * esz);
  const std::uint64_t at = data_offset_ + first * esz;
  if (read_at(fd_, raw.data(), raw.size(), at, path_) != raw.size())
    throw Error(path_ + ": the file ends before byte " + std::to_string(at + raw.size()) + " (it held " +
                std::to_string(file_bytes_) + " bytes when the run opened it): it was truncated while the run read it");
  for (std::size_t j = 0; j < n; ++j) out[j] = decode(raw.data() + j * esz);
}

std::int64_t TokenFile::at(std::uint64_t i) const {
  std::vector<std::int64_t> v;
  read(i, 1, v);
  return v[0];
}

std::int64_t TokenFile::decode(const unsigned char* p) const {
  const std::size_t esz = info(dtype_).bytes;
  std::uint64_t u = 0;
  for (std::size_t k = 0; k < esz; ++k) u |= std::uint64_t{p[k]} << (8 * k);
  std::int64_t v = 0;
  switch (dtype_) {
    case TokenDType::I16: v = static_cast<std::int16_t>(u); break;
    case TokenDType::I32: v = static_cast<std::int32_t>(u); break;
    case TokenDType::I64: v = static_cast<std::int64_t>(u); break;
    default:
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max())) return -1;
      v = static_cast<std::int64_t>(u);
  }
  if (v < 0 || v > std::numeric_limits<std::int32_t>::max()) return -1;
  return v;
}

void write_npy_i32(const std::string& path, const std::vector<std::int64_t>& shape,
                   const std::vector<std::int32_t>& values, const InputFiles& inputs, const std::string& what) {
  std::string dims;
  for (auto d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(header.size() & 0xff),
                       static_cast<char>(header.size() >> 8)};
  bytes += header;
  bytes.reserve(bytes.size() + 4 * values.size());
  for (std::int32_t v : values) {
    const auto u = static_cast<std::uint32_t>(v);
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>(u >> (8 * k)));
  }
  write_output_file(path, bytes, inputs, what);  // checked writes, only over a regular file
}

}  // namespace remat
