#include "core/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "core/util/error.h"
#include "core/util/json_io.h"

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

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
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

std::shared_ptr<const TokenFile> TokenFile::open(const std::string& path, const std::string& dtype) {
  struct stat st {};
  const int fd = open_regular_file(path, st);
  std::shared_ptr<TokenFile> f(new TokenFile);
  f->path_ = path;
  f->map_bytes_ = static_cast<std::size_t>(st.st_size);
  if (f->map_bytes_ == 0) {
    ::close(fd);
    throw Error(path + ": the token file is empty");
  }
  f->map_ = ::mmap(nullptr, f->map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (f->map_ == MAP_FAILED) {
    f->map_ = nullptr;
    throw Error(path + ": cannot be mapped (" + std::strerror(errno) + ")");
  }
  const auto* bytes = static_cast<const unsigned char*>(f->map_);
  std::size_t offset = 0;
  const bool npy = f->map_bytes_ >= 10 && std::memcmp(bytes, "\x93NUMPY", 6) == 0;
  if (npy) {
    const int major = bytes[6];
    std::size_t hlen = 0, hstart = 0;
    if (major == 1) {
      hlen = bytes[8] | (std::size_t{bytes[9]} << 8);
      hstart = 10;
    } else if (major == 2 || major == 3) {
      if (f->map_bytes_ < 12) throw Error(path + ": truncated .npy header");
      hlen = bytes[8] | (std::size_t{bytes[9]} << 8) | (std::size_t{bytes[10]} << 16) |
             (std::size_t{bytes[11]} << 24);
      hstart = 12;
    } else {
      throw Error(path + ": .npy format version " + std::to_string(major) + " is not one this reader knows (1-3)");
    }
    if (hlen > f->map_bytes_ - hstart) throw Error(path + ": truncated .npy header");
    const std::string header(reinterpret_cast<const char*>(bytes + hstart), hlen);
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
    if (count > (f->map_bytes_ - offset) / esz)
      throw Error(path + ": the .npy array of shape " + shape + " is longer than the file (truncated?)");
    f->count_ = count;
  } else {
    if (ends_with(path, ".npy")) throw Error(path + ": not a .npy file (no \\x93NUMPY magic)");
    f->dtype_ = dtype.empty() ? TokenDType::U16 : token_dtype_from_string(dtype);
    const std::size_t esz = info(f->dtype_).bytes;
    if (f->map_bytes_ % esz != 0)
      throw Error(path + ": " + std::to_string(f->map_bytes_) + " bytes is not a whole number of " +
                  to_string(f->dtype_) + " tokens (is --tokens-dtype right?)");
    f->count_ = f->map_bytes_ / esz;
  }
  f->data_ = bytes + offset;
  return f;
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

std::int64_t TokenFile::at(std::uint64_t i) const {
  const std::size_t esz = info(dtype_).bytes;
  const unsigned char* p = data_ + i * esz;
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
                   const std::vector<std::int32_t>& values) {
  std::string dims;
  for (auto d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot write '" + path + "'");
  const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                 static_cast<unsigned char>(header.size() & 0xff),
                                 static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(pre), 10);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (std::int32_t v : values) {
    const auto u = static_cast<std::uint32_t>(v);
    const char b[4] = {static_cast<char>(u), static_cast<char>(u >> 8), static_cast<char>(u >> 16),
                       static_cast<char>(u >> 24)};
    out.write(b, 4);
  }
  if (!out) throw Error("writing '" + path + "' failed");
}

}  // namespace remat
