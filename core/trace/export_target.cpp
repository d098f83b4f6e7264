// Where export may write (export_target.h).
#include "core/trace/export_target.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/trace/output_dir.h"
#include "core/trace/run_dir.h"
#include "core/util/error.h"

namespace fs = std::filesystem;

namespace remat {

namespace {

bool same_place(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec);
}

// The nearest existing directory at or above `p` that is a run or sweep directory (it holds
// summary.json or sweep.json, ours or not: such a directory is never written into).
std::optional<fs::path> enclosing_output_dir(const fs::path& p) {
  std::error_code ec;
  fs::path at = fs::weakly_canonical(fs::absolute(p, ec), ec);
  if (ec) return std::nullopt;
  for (;;) {
    if (fs::is_regular_file(at / kSummaryFile, ec) || fs::is_regular_file(at / schema::kSweepFile, ec)) return at;
    if (!at.has_relative_path()) return std::nullopt;
    at = at.parent_path();
  }
}

[[noreturn]] void refuse_other_dir(const std::string& target, const fs::path& d, const std::string& run_dir) {
  if (same_place(d, run_dir))
    throw Error("'" + target + "' is in the run directory '" + run_dir +
                "', which export gives only its own files (trace.json, the CSV tables)");
  throw Error("'" + target + "' is in the run or sweep directory '" + d.string() +
              "'; export writes into no run directory but the one it exports from ('" + run_dir +
              "'), and there only its own files");
}

}  // namespace

bool is_our_chrome_trace(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  const std::size_t n = std::strlen(kChromeTraceHead);
  std::string head(n, '\0');
  in.read(head.data(), static_cast<std::streamsize>(n));
  return in && head == kChromeTraceHead;
}

void check_export_file(const std::string& run_dir, const std::string& file, bool force) {
  if (file.empty()) throw Error("--out: the file name is empty");
  const fs::path f(file);
  const fs::path parent = f.parent_path().empty() ? fs::path(".") : f.parent_path();
  if (same_place(parent, run_dir) && f.filename() == kChromeTraceFile) return;  // its own trace.json
  if (auto d = enclosing_output_dir(parent)) refuse_other_dir(file, *d, run_dir);
  std::error_code ec;
  const auto st = fs::symlink_status(f, ec);
  if (!fs::exists(st)) return;
  if (!force) throw Error("'" + file + "' exists; use --force to replace it");
  if (!fs::is_regular_file(st)) throw Error("'" + file + "' is not a regular file; refusing to replace it even with --force");
  if (!is_our_chrome_trace(file))
    throw Error("'" + file + "' is not a Chrome trace that RematLab wrote; refusing to replace it even with --force");
}

void check_export_dir(const std::string& run_dir, const std::string& dir, bool force) {
  if (dir.empty()) throw Error("--out: the directory name is empty");
  if (same_place(dir, run_dir)) return;  // its own tables
  if (auto d = enclosing_output_dir(dir)) refuse_other_dir(dir, *d, run_dir);
  std::error_code ec;
  const auto st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return;
  if (!fs::is_directory(st)) throw Error("'" + dir + "' exists and is not a directory; refusing to write into it");
  if (!force) throw Error("'" + dir + "' exists; use --force to replace the CSV tables in it");
  const auto& tables = csv_table_files();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool table = std::find(tables.begin(), tables.end(), name) != tables.end();
    if (!table || !fs::is_regular_file(it->symlink_status(ec)))
      throw Error("'" + dir + "' holds '" + name + "', which an export of the CSV tables does not write; "
                  "refusing to write into it even with --force");
  }
  if (ec) throw Error("cannot read '" + dir + "': " + ec.message());
}

}  // namespace remat
