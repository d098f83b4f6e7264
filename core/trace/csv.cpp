#include "core/trace/csv.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include <unordered_set>

#include "core/util/error.h"
#include "core/util/json_io.h"
#include "core/util/limits.h"

namespace remat::csv {

// ---------------------------------------------------------------- OutFile

OutFile::OutFile(std::string path, InputFiles inputs, std::string what)
    : file_(std::move(path), std::move(inputs), std::move(what)), buf_(std::make_unique<char[]>(kSize)) {}

OutFile::~OutFile() = default;

void OutFile::flush() {
  if (len_ == 0) return;
  file_.write(buf_.get(), len_);
  len_ = 0;
}

void OutFile::write_through(std::string_view s) { file_.write(s.data(), s.size()); }

void OutFile::i64(std::int64_t v) {
  char* p = room(24);
  len_ += static_cast<std::size_t>(std::to_chars(p, p + 24, v).ptr - p);
}

void OutFile::u64(std::uint64_t v) {
  char* p = room(24);
  len_ += static_cast<std::size_t>(std::to_chars(p, p + 24, v).ptr - p);
}

void OutFile::f64(double v) {
  if (std::isnan(v)) return write("nan");
  if (std::isinf(v)) return write(v > 0 ? "inf" : "-inf");
  char* p = room(32);
  len_ += static_cast<std::size_t>(std::to_chars(p, p + 32, v).ptr - p);
}

void OutFile::ns_as_us(std::int64_t ns) {
  if (ns < 0) {
    put('-');
    // -INT64_MIN does not exist; times that far out do not either.
    ns = ns == INT64_MIN ? INT64_MAX : -ns;
  }
  char* p = room(32);
  char* e = std::to_chars(p, p + 24, ns / 1000).ptr;
  e[0] = '.';
  e[1] = static_cast<char>('0' + (ns / 100) % 10);
  e[2] = static_cast<char>('0' + (ns / 10) % 10);
  e[3] = static_cast<char>('0' + ns % 10);
  len_ += static_cast<std::size_t>(e + 4 - p);
}

void OutFile::json_string(std::string_view s) {
  bool plain = true;
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (plain && s.size() <= 62) {
    char* p = room(s.size() + 2);
    p[0] = '"';
    std::memcpy(p + 1, s.data(), s.size());
    p[s.size() + 1] = '"';
    len_ += s.size() + 2;
    return;
  }
  put('"');
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    write(s.substr(start, i - start));
    switch (c) {
      case '"': write("\\\""); break;
      case '\\': write("\\\\"); break;
      case '\n': write("\\n"); break;
      case '\r': write("\\r"); break;
      case '\t': write("\\t"); break;
      default: {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", c);
        write(b);
      }
    }
    start = i + 1;
  }
  write(s.substr(start));
  put('"');
}

void OutFile::commit() {
  flush();
  file_.commit();
}

// ---------------------------------------------------------------- Writer

bool needs_quotes(std::string_view s) {
  for (char c : s)
    if (c == ',' || c == '"' || c == '\n' || c == '\r') return true;
  return !s.empty() && (s.front() == ' ' || s.back() == ' ');
}

Writer::Writer(const std::string& path, std::initializer_list<std::string_view> header) : out_(path) {
  for (auto h : header) str(h);
  out_.put('\n');
  field_ = 0;
}

Writer::Writer(const std::string& path, const std::vector<std::string>& header) : out_(path) {
  for (const auto& h : header) str(h);
  out_.put('\n');
  field_ = 0;
}

Writer& Writer::str(std::string_view s) {
  sep();
  if (!needs_quotes(s)) {
    out_.write(s);
    return *this;
  }
  out_.put('"');
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '"') continue;
    out_.write(s.substr(start, i + 1 - start));
    out_.put('"');
    start = i + 1;
  }
  out_.write(s.substr(start));
  out_.put('"');
  return *this;
}

void Writer::end_row() {
  out_.put('\n');
  field_ = 0;
  ++rows_;
}

// ---------------------------------------------------------------- Reader

Reader::Reader(const std::string& path)
    : name_(path), data_(read_regular_file(path, limits::kTableFileBytes)) {
  init();
}

Reader::Reader(std::string name, std::string contents) : name_(std::move(name)), data_(std::move(contents)) {
  init();
}

void Reader::init() {
  if (data_.empty()) throw Error(name_ + ": empty (no header row)");
  if (data_.back() != '\n')
    throw Error(name_ + ": truncated (the last line has no line break)");
  if (!parse_row(header_)) throw Error(name_ + ": empty (no header row)");
  // One hash set, not every pair (a header of 10^5 columns took 10 s that way).
  std::unordered_set<std::string_view> seen;
  seen.reserve(header_.size());
  for (const auto& h : header_)
    if (!seen.insert(h).second) throw Error(name_ + ": column " + quote_field(h) + " appears twice");
  fields_.reserve(header_.size());
}

std::size_t Reader::col(std::string_view name) const {
  for (std::size_t i = 0; i < header_.size(); ++i)
    if (header_[i] == name) return i;
  throw Error(name_ + ": missing column '" + std::string(name) + "'");
}

bool Reader::parse_row(std::vector<std::string_view>& out) {
  out.clear();
  if (pos_ >= data_.size()) return false;
  line_ = next_line_;
  char* d = data_.data();
  const std::size_t n = data_.size();
  // The end of the row when it holds no quoted field (found once, not per field).
  const char* nl = static_cast<const char*>(std::memchr(d + pos_, '\n', n - pos_));
  std::size_t eol = nl ? static_cast<std::size_t>(nl - d) : n;
  while (true) {
    if (pos_ < n && d[pos_] == '"') {
      // Quoted: unescape in place ("" -> ") and keep the unescaped prefix.
      std::size_t start = ++pos_, w = pos_;
      while (true) {
        if (pos_ >= n) throw Error(name_ + " line " + std::to_string(line_) + ": unterminated quoted field");
        char c = d[pos_];
        if (c == '"') {
          if (pos_ + 1 < n && d[pos_ + 1] == '"') {
            d[w++] = '"';
            pos_ += 2;
            continue;
          }
          ++pos_;
          break;
        }
        if (c == '\n') ++next_line_;
        d[w++] = c;
        ++pos_;
      }
      out.emplace_back(d + start, w - start);
      // A quoted field may hold line breaks: the row ends at the first one after it.
      nl = static_cast<const char*>(std::memchr(d + pos_, '\n', n - pos_));
      eol = nl ? static_cast<std::size_t>(nl - d) : n;
      if (pos_ < n && d[pos_] == '\r') ++pos_;
      if (pos_ >= n || d[pos_] == '\n') {
        ++pos_;
        ++next_line_;
        return true;
      }
      if (d[pos_] != ',')
        throw Error(name_ + " line " + std::to_string(line_) + ": text after a closing quote");
      ++pos_;
      continue;
    }
    std::size_t start = pos_;
    const char* c = static_cast<const char*>(std::memchr(d + pos_, ',', eol - pos_));
    std::size_t end = c ? static_cast<std::size_t>(c - d) : eol;
    std::size_t fe = end;
    if (!c && fe > start && d[fe - 1] == '\r') --fe;
    out.emplace_back(d + start, fe - start);
    if (c) {
      pos_ = end + 1;
      continue;
    }
    pos_ = eol + 1;
    ++next_line_;
    return true;
  }
}

bool Reader::next() {
  if (!parse_row(fields_)) return false;
  if (rows_ >= limits::kTableRows)
    throw LimitError(name_ + ": more than the " + std::to_string(limits::kTableRows) + " rows a table may have");
  if (fields_.size() != header_.size())
    throw Error(name_ + " line " + std::to_string(line_) + ": " + std::to_string(fields_.size()) +
                " fields, the header has " + std::to_string(header_.size()) +
                (pos_ >= data_.size() ? " (truncated?)" : ""));
  ++rows_;
  return true;
}

void Reader::fail(std::size_t c, const std::string& why) const {
  std::string col = c < header_.size() ? std::string(header_[c]) : std::to_string(c);
  throw Error(name_ + " line " + std::to_string(line_) + ", column '" + col + "': " + why);
}

void Reader::not_a(std::size_t c, const char* what) const {
  fail(c, "'" + std::string(fields_[c]) + "' is not " + what);
}

std::int32_t Reader::i32(std::size_t c) const {
  std::string_view s = fields_[c];
  std::int32_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || s.empty())
    fail(c, "'" + std::string(s) + "' is not a 32-bit integer");
  return v;
}

double Reader::f64(std::size_t c) const {
  std::string_view s = fields_[c];
  double v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || s.empty())
    fail(c, "'" + std::string(s) + "' is not a number");
  return v;
}

}  // namespace remat::csv

namespace remat {

std::string quote_field(std::string_view s) {
  constexpr std::size_t kMax = 80;
  std::string q = "'";
  for (std::size_t i = 0; i < s.size() && i < kMax; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      q += b;
    } else {
      q += static_cast<char>(c);
    }
  }
  q += "'";
  if (s.size() > kMax) q += "... (" + std::to_string(s.size()) + " characters)";
  return q;
}

}  // namespace remat
