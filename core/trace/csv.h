// Fast CSV (RFC 4180) and atomic file output for run directories.
//
// OutFile buffers what it is given and writes it through an OutputFile (core/util/output_file.h):
// a temporary file next to the target, every write checked, commit() renaming it into place, so
// a reader never sees half a file under the final name and only a regular file is replaced.
// Writer formats numbers with std::to_chars (integers exactly, doubles in the shortest form that
// reads back to the same bits) and quotes text only when it holds a comma, quote or line break.
// Reader loads a whole file, checks the header and that every row has as many fields as it, and
// parses numbers with std::from_chars; every error names the file, the line and the column.
#pragma once
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/output_file.h"

namespace remat::csv {

class OutFile {
 public:
  explicit OutFile(std::string path, InputFiles inputs = {}, std::string what = {});
  ~OutFile();  // without commit(): the temporary file is removed
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;

  void write(std::string_view s) {
    if (len_ + s.size() > kSize) {
      flush();
      if (s.size() > kSize) return write_through(s);
    }
    std::memcpy(buf_.get() + len_, s.data(), s.size());
    len_ += s.size();
  }
  void put(char c) {
    if (len_ + 1 > kSize) flush();
    buf_[len_++] = c;
  }
  void i64(std::int64_t v);
  void u64(std::uint64_t v);
  void f64(double v);  // shortest round-trip form; nan / inf as "nan", "inf", "-inf"
  // Nanoseconds as microseconds with three decimals, e.g. 1234567 -> "1234.567".
  void ns_as_us(std::int64_t ns);
  // A JSON string literal, quotes included.
  void json_string(std::string_view s);

  // Flushes, syncs nothing (run directories are not databases), closes and renames into place.
  // Throws Error naming the file on any write error.
  void commit();
  const std::string& path() const { return file_.path(); }

 private:
  static constexpr std::size_t kSize = 1 << 20;
  // Room for n more bytes (n <= 64), flushing first when needed.
  char* room(std::size_t n) {
    if (len_ + n > kSize) flush();
    return buf_.get() + len_;
  }
  void flush();
  void write_through(std::string_view s);
  OutputFile file_;
  std::unique_ptr<char[]> buf_;
  std::size_t len_ = 0;
};

class Writer {
 public:
  Writer(const std::string& path, std::initializer_list<std::string_view> header);
  Writer(const std::string& path, const std::vector<std::string>& header);

  Writer& str(std::string_view s);
  Writer& i64(std::int64_t v) { sep(); out_.i64(v); return *this; }
  Writer& u64(std::uint64_t v) { sep(); out_.u64(v); return *this; }
  Writer& f64(double v) { sep(); out_.f64(v); return *this; }
  void end_row();
  void commit() { out_.commit(); }
  std::size_t rows() const { return rows_; }  // data rows so far

 private:
  void sep() {
    if (field_++) out_.put(',');
  }
  OutFile out_;
  std::size_t field_ = 0, rows_ = 0;
};

// Whether a field must be quoted.
bool needs_quotes(std::string_view s);

class Reader {
 public:
  // Reads the whole file, which must be a regular file (read_regular_file: no FIFO or
  // directory, at most limits::kTableFileBytes). Throws Error when it is missing, unreadable,
  // empty, or does not end with a line break (a truncated file); rows past limits::kTableRows
  // are a LimitError.
  explicit Reader(const std::string& path);
  Reader(std::string name, std::string contents);  // for tests

  // Index of a column by name; throws Error naming the file and the column when it is missing.
  std::size_t col(std::string_view name) const;
  const std::vector<std::string_view>& header() const { return header_; }

  // Moves to the next data row; false at the end. Throws Error when a row has the wrong number
  // of fields or a quote is not closed.
  bool next();

  std::string_view str(std::size_t c) const { return fields_[c]; }
  // Inline: the hot path of reading a run directory (a few million fields).
  std::int64_t i64(std::size_t c) const { return integer<std::int64_t>(c, "an integer"); }
  std::uint64_t u64(std::size_t c) const { return integer<std::uint64_t>(c, "a non-negative integer"); }
  std::int32_t i32(std::size_t c) const;
  double f64(std::size_t c) const;

  std::size_t line() const { return line_; }  // 1-based line of the current row
  std::size_t rows() const { return rows_; }  // data rows read so far
  const std::string& name() const { return name_; }
  // Whether the file holds a NUL byte anywhere (one scan; lets a caller skip checking each field).
  bool holds_nul() const { return data_.find('\0') != std::string::npos; }
  [[noreturn]] void fail(std::size_t c, const std::string& why) const;

 private:
  template <class T>
  T integer(std::size_t c, const char* what) const {
    const std::string_view s = fields_[c];
    T v = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || s.empty()) not_a(c, what);
    return v;
  }
  [[noreturn]] void not_a(std::size_t c, const char* what) const;
  void init();
  bool parse_row(std::vector<std::string_view>& out);
  std::string name_;
  std::string data_;
  std::size_t pos_ = 0, line_ = 0, next_line_ = 1, rows_ = 0;
  std::vector<std::string_view> header_, fields_;
};

}  // namespace remat::csv

namespace remat {

// `s` quoted for a message: at most 80 characters, control bytes (NUL included) as \xNN.
std::string quote_field(std::string_view s);

}  // namespace remat
