// A tiny model and a real run of it: the run_dir target starts from its run directory, the
// safetensors target lays weights out for it and reads its shards, and rematlab-fuzz-seeds
// writes them as seeds.
#pragma once
#include <string>
#include <vector>

#include "core/model/model_config.h"
#include "core/trace/trace.h"

namespace remat::fuzz {

// A two-block GPT-2 with dropout, 32 wide, 8 tokens.
ModelConfig tiny_model();
// One counted step of it on the CPU, profiled; writes its weights when weights_out is given.
Trace tiny_run(const std::string& weights_out = "");
// A directory of this process holding tiny_model()'s weights (zeros) as shards of 16 KiB and
// their model.safetensors.index.json, written at the first call: the shards an index given to
// the safetensors target names.
const std::string& tiny_shards();
// summary.json, schedule.json and the CSV tables: every file read_run_dir reads. A run_dir input
// is a tag byte (an index into this list, modulo its size) and the bytes that replace that file.
const std::vector<std::string>& run_dir_files();

}  // namespace remat::fuzz
