#include "core/trace/table_reader.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <limits>

#include "core/util/error.h"
#include "core/util/limits.h"

namespace remat {

namespace {

std::string join_values(const std::vector<std::string_view>& v) {
  std::string s;
  for (auto x : v) s += (s.empty() ? "" : ", ") + std::string(x);
  return s;
}

}  // namespace

TableReader::TableReader(const std::string& path, const schema::Table& t, const TableContext& ctx)
    : csv_(path), table_(t), nul_(csv_.holds_nul()) {
  using schema::Bound;
  const std::size_t n = t.columns.size();
  file_col_.assign(n, kAbsent);
  why_.assign(n, std::string());
  cells_.assign(n, Cell{0});
  // Steps are 32-bit in every table.
  const std::int64_t layers = ctx.layers,
                     last = std::min<std::int64_t>(ctx.steps_run - 1, std::numeric_limits<std::int32_t>::max());
  const std::string ls = std::to_string(layers), steps = std::to_string(ctx.steps_run);
  for (std::size_t k = 0; k < n; ++k) {
    const schema::Column& c = t.columns[k];
    if (!c.in(ctx.version)) continue;
    file_col_[k] = csv_.col(c.name);
    std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
    std::string& why = why_[k];
    switch (c.bound) {
      case Bound::None: case Bound::Duration: break;
      case Bound::Fixed: lo = c.min; hi = c.max; break;
      case Bound::Time: lo = 0; hi = limits::kClockNs; why = "run-clock nanoseconds"; break;
      case Bound::Bytes: lo = 0; hi = limits::kMemoryBytes; why = "bytes of memory"; break;
      case Bound::Delta: lo = -limits::kMemoryBytes; hi = limits::kMemoryBytes; why = "bytes allocated (+) or freed (-)"; break;
      case Bound::Block: lo = -1; hi = layers - 1; why = "a block index or -1; model.layers is " + ls; break;
      case Bound::BlockOnly: lo = 0; hi = layers - 1; why = "a block index; model.layers is " + ls; break;
      case Bound::EventStep: lo = -1; hi = last; why = "a step of the run or -1; warmup + steps is " + steps; break;
      case Bound::Step: lo = 0; hi = last; why = "a step of the run; warmup + steps is " + steps; break;
      case Bound::LastStep: lo = hi = last; why = "the run's last step, warmup + steps - 1"; break;
    }
    checks_.push_back({k, file_col_[k], c.type, c.bound, c.non_empty, lo, hi, c.values});
  }
  // Every column of the file belongs to the run's format version.
  for (const auto& h : csv_.header()) {
    bool known = false;
    for (const Check& c : checks_) known = known || t.columns[c.k].name == h;
    if (!known)
      throw Error(csv_.name() + ": column " + quote_field(h) + " is not in format version " +
                  std::to_string(ctx.version) + " of " + std::string(t.file));
  }
  for (const auto& [a, b] : t.ordered) {
    std::size_t ka = col(a), kb = col(b);
    if (has(ka) && has(kb)) ordered_.emplace_back(ka, kb);
  }
}

std::size_t TableReader::col(std::string_view name) const {
  // A column whose value set changed is one entry per set: the one of the file's version.
  for (std::size_t k = 0; k < table_.columns.size(); ++k)
    if (table_.columns[k].name == name && has(k)) return k;
  for (std::size_t k = 0; k < table_.columns.size(); ++k)
    if (table_.columns[k].name == name) return k;
  throw Error("the schema of " + std::string(table_.file) + " has no column '" + std::string(name) + "'");
}

bool TableReader::next() {
  if (!csv_.next()) return false;
  for (const Check& c : checks_) check(c);
  for (const auto& [a, b] : ordered_)
    if (cells_[b].i < cells_[a].i)
      fail(b, std::to_string(cells_[b].i) + " is before " + std::string(table_.columns[a].name) + " " +
                  std::to_string(cells_[a].i));
  return true;
}

void TableReader::out_of_range(const Check& c, std::int64_t v) const {
  const std::string& why = why_[c.k];
  if (c.bound == schema::Bound::LastStep) fail(c.k, std::to_string(v) + " is not " + std::to_string(c.hi) + ", " + why);
  fail(c.k, std::to_string(v) + " is outside " + std::to_string(c.lo) + ".." + std::to_string(c.hi) +
                (why.empty() ? "" : " (" + why + ")"));
}

void TableReader::check(const Check& c) {
  using schema::Type;
  Cell& cell = cells_[c.k];
  switch (c.type) {
    case Type::Int: {
      const std::int64_t v = csv_.i64(c.fc);
      if (v < c.lo || v > c.hi) out_of_range(c, v);
      if (c.bound == schema::Bound::Delta && v == 0) fail(c.k, "an event of 0 bytes");
      cell.i = v;
      return;
    }
    case Type::Uint: {
      const std::uint64_t v = csv_.u64(c.fc);
      if (c.bound != schema::Bound::None && v > static_cast<std::uint64_t>(c.hi))
        fail(c.k, std::to_string(v) + " is more than " + std::to_string(c.hi) + " (" + why_[c.k] + ")");
      cell.u = v;
      return;
    }
    case Type::Float: {
      const double v = csv_.f64(c.fc);
      if (c.bound == schema::Bound::Duration && !(std::isfinite(v) && v >= 0))
        fail(c.k, quote_field(csv_.str(c.fc)) + " is not a finite number >= 0");
      cell.f = v;
      return;
    }
    case Type::Enum: {
      const std::string_view s = csv_.str(c.fc);
      const auto& values = *c.values;
      for (std::size_t i = 0; i < values.size(); ++i)
        if (values[i] == s) {
          cell.e = i;
          return;
        }
      fail(c.k, "unknown " + std::string(table_.columns[c.k].name) + " " + quote_field(s) + " (one of: " +
                    join_values(values) + ")");
    }
    case Type::String: {
      const std::string_view s = csv_.str(c.fc);
      if (c.non_empty && s.empty()) fail(c.k, "is empty");
      if (nul_ && s.find('\0') != std::string_view::npos) fail(c.k, quote_field(s) + " holds a NUL byte");
      return;
    }
  }
}

}  // namespace remat
