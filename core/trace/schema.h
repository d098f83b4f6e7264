// The run directory's schema, in one table: for each CSV table its columns (type, value set,
// range) and for summary.json and sweep.json their fields, per format version
// (docs/trace-format.md). The writers take their headers from it and the readers check every
// row and field against it.
//
// How the format changes (the rule; docs/trace-format.md "Versions" says the same):
//   * Any change a reader of the current version would misread — a new column or field, one
//     removed or renamed, a new enumeration value, a changed unit or meaning — is a new format
//     version: bump kTraceFormatVersion (trace.h; or kSweepFormatVersion), give the new column `since` =
//     the new version (a removed one `until` = it), and make the reader fill in what an older
//     version lacks (TableReader::has tells whether the file's version has the column).
//   * Commit a run directory (and a sweep) of the new version under tests/data/ next to the
//     old ones; RunDirFixtures reads every fixture there, so each version stays readable.
//   * Older versions are read; newer ones are refused by name (check_format_version).
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace remat::schema {

// What summary.json and sweep.json say they are ("format").
inline constexpr const char* kRunFormat = "rematlab-run";
inline constexpr const char* kSweepFile = "sweep.json";
inline constexpr const char* kSweepFormat = "rematlab-sweep";

// The newest sweep.json "format_version" this RematLab writes and reads (summary.json's is
// kTraceFormatVersion in trace.h).
inline constexpr int kSweepFormatVersion = 1;
// A run of several ranks (data parallelism): ranks.json over rank-N/ run directories.
inline constexpr const char* kRanksFile = "ranks.json";
inline constexpr const char* kRanksFormat = "rematlab-ranks";
inline constexpr int kRanksFormatVersion = 1;

// The version of a file from its "format_version" field `v`: Error "WHERE: format version V is
// newer than this RematLab reads (N); upgrade RematLab" for a newer one; names the versions it
// knows for one below 1 or not an integer.
int check_format_version(const nlohmann::json& v, int newest, const std::string& where);

// The CSV tables of a run directory.
inline constexpr const char* kEventsFile = "memory_events.csv";
inline constexpr const char* kTimelineFile = "memory_timeline.csv";
inline constexpr const char* kOpsFile = "ops.csv";
inline constexpr const char* kScheduleCsv = "schedule.csv";
inline constexpr const char* kLedgerFile = "ledger.csv";
inline constexpr const char* kLossFile = "loss.csv";
inline constexpr const char* kRoutingFile = "routing.csv";

enum class Type : std::uint8_t { Int, Uint, Float, Enum, String };

// What bounds a value beyond its type.
enum class Bound : std::uint8_t {
  None,       // the type's range; a Float may be nan or inf
  Fixed,      // [min, max]
  Time,       // run-clock nanoseconds: [0, limits::kClockNs]
  Bytes,      // bytes of memory: [0, limits::kMemoryBytes]
  Delta,      // an allocation (+) or free (-): 1 <= |v| <= limits::kMemoryBytes
  Block,      // a block index or -1 (outside the blocks): [-1, model.layers - 1]
  BlockOnly,  // a block index: [0, model.layers - 1]
  EventStep,  // a step of the run or -1 (before the first): [-1, warmup + steps - 1]
  Step,       // a step of the run: [0, warmup + steps - 1]
  LastStep,   // the last step of the run: warmup + steps - 1
  Duration,   // a Float: finite and >= 0
};

struct Column {
  std::string_view name;
  Type type;
  Bound bound = Bound::None;
  std::int64_t min = 0, max = 0;                       // Bound::Fixed
  const std::vector<std::string_view>* values = nullptr;  // Type::Enum: the value set, in order
  bool non_empty = false;                              // Type::String
  int since = 1;  // first format version with the column
  int until = 0;  // first format version without it (0: still there)
  bool in(int version) const { return version >= since && (until == 0 || version < until); }
};

struct Table {
  std::string_view file;
  bool required;  // false: derived, read back only when present (memory_timeline.csv)
  std::vector<Column> columns;
  // Pairs of columns (start, end): end >= start on every row.
  std::vector<std::pair<std::string_view, std::string_view>> ordered;
  int since = 1;  // first format version with the table (an older directory has none: no rows)
  bool in(int version) const { return version >= since; }
  // Column names of `version`, in the order the writer writes them.
  std::vector<std::string> header(int version) const;
};

// Every CSV table of a run directory, in the order of csv_table_files().
const std::vector<Table>& tables();
const Table& table(std::string_view file);  // throws Error for a file with no table

// The value sets, from the core's own enum tables (to_string of Category, Phase, Space,
// Stream, ActionKind; the ledger's decisions).
const std::vector<std::string_view>& category_values();
const std::vector<std::string_view>& phase_values();
const std::vector<std::string_view>& space_values();
const std::vector<std::string_view>& stream_values();     // of the newest version
const std::vector<std::string_view>& stream_values_v1();  // versions 1 and 2: no `comm`
const std::vector<std::string_view>& action_values();  // ActionKind, then "head"
const std::vector<std::string_view>& decision_values();
const std::vector<std::string_view>& status_values();  // summary.json "status"

// ------------------------------------------------------------------ JSON files

enum class JsonType : std::uint8_t {
  String, Bool, Int, Uint, Number,
  NumberOrNull,  // a double written by nlohmann::json: nan and inf become null
  Object, Array,
  UintArray, NumberArray, NumberOrNullArray, StringArray,
};

struct Field {
  std::string_view path;  // "plan.actions": a field of the object "plan"
  JsonType type;
  bool required = true;
  std::int64_t min = std::numeric_limits<std::int64_t>::min();  // JsonType::Int
  std::int64_t max = std::numeric_limits<std::int64_t>::max();
  int since = 1;
  int until = 0;
  bool in(int version) const { return version >= since && (until == 0 || version < until); }
};

// summary.json and each entry of its "peak_tensors"; sweep.json and each entry of its "runs".
const std::vector<Field>& summary_fields();
const std::vector<Field>& peak_tensor_fields();
const std::vector<Field>& sweep_fields();
const std::vector<Field>& sweep_run_fields();

// Checks `j` (an object) against the fields of `version`: each required one present, each
// present one of its type and range. Throws Error "WHERE: field 'PATH' ..." with the value.
void check_fields(const nlohmann::json& j, const std::vector<Field>& fields, int version,
                  const std::string& where);

}  // namespace remat::schema
