// Run directories as `compare`, `export`, `--costs-from` and the desktop app read them: one
// file of a real run directory replaced by the input, the directory read back, and its Chrome
// trace written as `export` does.
#include <filesystem>

#include "core/trace/run_dir.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"
#include "fuzz/tiny_run.h"

namespace fs = std::filesystem;

namespace remat::fuzz {

namespace {

struct Base {
  std::string dir;
  std::vector<std::string> contents;  // of run_dir_files(), as written
  Base() : dir(scratch_path("run")) {
    write_run_dir(tiny_run(), dir, false);
    for (const auto& f : run_dir_files()) contents.push_back(read_file((fs::path(dir) / f).string()));
  }
};

}  // namespace

void run_dir(const std::uint8_t* data, std::size_t size) {
  static const Base base;
  if (size == 0) return;
  const std::size_t tag = data[0] % run_dir_files().size();
  const std::string path = (fs::path(base.dir) / run_dir_files()[tag]).string();
  write_file(path, data + 1, size - 1);
  // What `export --format chrome` does with a directory it read.
  refused_or_accepted([] { write_chrome_trace(read_run_dir(base.dir), scratch_path(kChromeTraceFile)); });
  write_file(path, base.contents[tag]);
}

}  // namespace remat::fuzz
