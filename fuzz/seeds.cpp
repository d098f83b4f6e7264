// rematlab-fuzz-seeds DIR: seed inputs made by the code they feed, so they always match it:
// DIR/run_dir/ (a tag byte and each file of the tiny run's directory) and DIR/safetensors/
// (the tiny run's weights, and the index of the tiny model's shards). scripts/fuzz.sh adds them to the committed seeds in fuzz/corpus/.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "core/io/weight_files.h"
#include "core/trace/run_dir.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/tiny_run.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: rematlab-fuzz-seeds DIR\n";
    return 2;
  }
  using namespace remat::fuzz;
  try {
    const fs::path out = argv[1];
    fs::create_directories(out / "run_dir");
    fs::create_directories(out / "safetensors");
    const std::string weights = (out / "safetensors" / "tiny.safetensors").string();
    const std::string run = scratch_path("run");
    remat::write_run_dir(tiny_run(weights), run, false);
    write_file((out / "safetensors" / "tiny-index.json").string(),
               read_file((fs::path(tiny_shards()) / remat::kWeightsIndexFile).string()));
    const auto& files = run_dir_files();
    for (std::size_t i = 0; i < files.size(); ++i) {
      char tag = static_cast<char>(i);
      char name[8];
      std::snprintf(name, sizeof name, "%02zu-", i);
      write_file((out / "run_dir" / (name + files[i])).string(),
                 std::string(1, tag) + read_file((fs::path(run) / files[i]).string()));
    }
  } catch (const std::exception& e) {
    std::cerr << "rematlab-fuzz-seeds: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
