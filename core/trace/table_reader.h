// A CSV table of a run directory read against its schema (core/trace/schema.h): the header
// must hold exactly the columns of the run's format version, and next() checks every field of
// every row — its type, range, value set, no NUL — before the caller sees it, parsing each field
// once. Errors name the file, the line, the column and the value.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/trace/csv.h"
#include "core/trace/schema.h"

namespace remat {

// What the ranges of a table depend on: from summary.json, read before the tables.
struct TableContext {
  int version = 0;             // the run's format version
  int layers = 0;              // model.layers
  std::int64_t steps_run = 0;  // warmup + steps
};

class TableReader {
 public:
  // Reads `path` (a regular file, bounded by limits::kTableFileBytes) as schema table `t`.
  TableReader(const std::string& path, const schema::Table& t, const TableContext& ctx);
  TableReader(const TableReader&) = delete;  // the fields are views into its buffer
  TableReader& operator=(const TableReader&) = delete;

  // Index of a column of the schema (not of the file), the one of the file's version where a
  // column has an entry per version; throws Error for a name it lacks.
  std::size_t col(std::string_view name) const;
  // Whether the file's format version has column k (a reader fills in what an older one lacks).
  bool has(std::size_t k) const { return file_col_[k] != kAbsent; }

  // Moves to the next row and checks every field; false at the end.
  bool next();

  std::int64_t i64(std::size_t k) const { return cells_[k].i; }
  std::uint64_t u64(std::size_t k) const { return cells_[k].u; }
  double f64(std::size_t k) const { return cells_[k].f; }
  std::size_t enum_index(std::size_t k) const { return cells_[k].e; }  // into Column::values
  std::string_view str(std::size_t k) const { return csv_.str(file_col_[k]); }

  std::size_t line() const { return csv_.line(); }
  std::size_t rows() const { return csv_.rows(); }
  const std::string& name() const { return csv_.name(); }
  // Throws Error "FILE line N, column 'C': why".
  [[noreturn]] void fail(std::size_t k, const std::string& why) const { csv_.fail(file_col_[k], why); }

 private:
  static constexpr std::size_t kAbsent = static_cast<std::size_t>(-1);
  union Cell {
    std::int64_t i;
    std::uint64_t u;
    double f;
    std::size_t e;
  };
  // What next() checks of one column the file has, in one place (the loop over a row).
  struct Check {
    std::size_t k, fc;  // schema column, file column
    schema::Type type;
    schema::Bound bound;
    bool non_empty;
    std::int64_t lo, hi;  // the range of an integer (Uint: hi only)
    const std::vector<std::string_view>* values;
  };
  void check(const Check& c);
  [[noreturn]] void out_of_range(const Check& c, std::int64_t v) const;
  csv::Reader csv_;
  const schema::Table& table_;
  std::vector<std::size_t> file_col_;  // per schema column: its column in the file
  std::vector<std::string> why_;       // per schema column: what its range is, for the message
  std::vector<Check> checks_;
  std::vector<std::pair<std::size_t, std::size_t>> ordered_;
  std::vector<Cell> cells_;
  bool nul_ = false;  // the file holds a NUL byte: look for it in each text field
};

}  // namespace remat
