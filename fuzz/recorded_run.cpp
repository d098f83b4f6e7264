// A recorded PyTorch step as `plan --from-run DIR` reads it: one file of a real recording
// (tests/data/recorded-v2, made by rematlab.record with the profiler) replaced by the input, the
// recording read, and plans of every kind predicted from it.
#include <filesystem>

#include "core/analysis/recorded_plan.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"

namespace fs = std::filesystem;

namespace remat::fuzz {

namespace {

struct Recording {
  std::string dir;
  std::vector<std::string> contents;  // of recorded_run_files(), as recorded
  Recording() : dir(scratch_path("recorded")) {
    const fs::path from = fs::path(REMAT_SOURCE_DIR) / "tests" / "data" / "recorded-v2";
    fs::create_directories(dir);
    for (const auto& f : recorded_run_files()) {
      contents.push_back(read_file((from / f).string()));
      write_file((fs::path(dir) / f).string(), contents.back());
    }
  }
};

}  // namespace

const std::vector<std::string>& recorded_run_files() {
  static const std::vector<std::string> files = {"summary.json", "saved_tensors.csv", "module_calls.csv",
                                                 "op_outputs.csv", "ops.csv", "memory_events.csv"};
  return files;
}

void recorded_run(const std::uint8_t* data, std::size_t size) {
  static const Recording base;
  if (size == 0) return;
  const std::size_t tag = data[0] % recorded_run_files().size();
  const std::string path = (fs::path(base.dir) / recorded_run_files()[tag]).string();
  write_file(path, data + 1, size - 1);
  refused_or_accepted([] {
    const RecordedRun run = read_recorded_run(base.dir);
    for (const char* plan : {"per-block", "every:2", "segments:2", "sqrt", "modules:*.mlp,*attn*",
                             "selective:keep=matmul@every:2"})
      refused_or_accepted([&] { predict_recorded_plan(run, parse_checkpoint_plan(plan)); });
  });
  write_file(path, base.contents[tag]);
}

}  // namespace remat::fuzz
