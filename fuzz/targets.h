// The fuzz targets: one reader of untrusted input each (docs/testing.md). Each function takes
// one input, feeds it to the reader the way a user's file reaches it, and returns when the input
// was accepted or refused with remat::Error. fuzz_main.cpp makes a libFuzzer binary of one;
// tests/unit/fuzz_regressions_test.cpp replays tests/fuzz-regressions/<name>/ through all.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace remat::fuzz {

using Entry = void (*)(const std::uint8_t* data, std::size_t size);

void model_config(const std::uint8_t* data, std::size_t size);  // load_model_file: our JSON or HF
void hf_config(const std::uint8_t* data, std::size_t size);     // model_from_hf_json
void schedule(const std::uint8_t* data, std::size_t size);      // load_schedule_file + validator
void safetensors(const std::uint8_t* data, std::size_t size);   // open_weight_files: a file or an index
void run_dir(const std::uint8_t* data, std::size_t size);       // read_run_dir (one file replaced), export
void sweep(const std::uint8_t* data, std::size_t size);         // read_sweep_json
void torch_snapshot(const std::uint8_t* data, std::size_t size);  // pickle::parse + trace_from_torch_snapshot
void profiler_trace(const std::uint8_t* data, std::size_t size);  // import_profiler_trace, written and read back
void recorded_run(const std::uint8_t* data, std::size_t size);    // read_recorded_run (one file replaced) + plans
void ranks_json(const std::uint8_t* data, std::size_t size);      // read_ranks_json
void token_file(const std::uint8_t* data, std::size_t size);      // TokenFile::open + batches
void plugin_reply(const std::uint8_t* data, std::size_t size);    // decode_child_reply + declarations, schedule

// The files of a recording a recorded_run input replaces: a tag byte (an index into this list,
// modulo its size) and the bytes that replace that file.
const std::vector<std::string>& recorded_run_files();

struct Target {
  const char* name;  // the directory name under fuzz/corpus and tests/fuzz-regressions
  Entry entry;
};

inline constexpr Target kTargets[] = {
    {"model_config", model_config}, {"hf_config", hf_config}, {"schedule", schedule},
    {"safetensors", safetensors},   {"run_dir", run_dir},     {"sweep", sweep},
    {"torch_snapshot", torch_snapshot}, {"profiler_trace", profiler_trace}, {"recorded_run", recorded_run},
    {"ranks_json", ranks_json},         {"token_file", token_file},         {"plugin_reply", plugin_reply},
};

}  // namespace remat::fuzz
