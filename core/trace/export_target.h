// Where `rematlab-batch export` may write (docs/batch.md, export): never into a run or sweep
// directory other than the run directory it exports from, and, over something that exists, only
// with force and only over what an export itself writes.
#pragma once
#include <string>

namespace remat {

// --format chrome --out FILE. The run's own trace.json is always allowed. Throws Error saying why.
void check_export_file(const std::string& run_dir, const std::string& file, bool force);
// --format csv --out DIR. The run directory itself is always allowed; another existing DIR only
// with force and only when it holds nothing but the CSV tables. Throws Error saying why.
void check_export_dir(const std::string& run_dir, const std::string& dir, bool force);

// Whether `file` begins as a Chrome trace that RematLab wrote (write_chrome_trace).
bool is_our_chrome_trace(const std::string& file);

}  // namespace remat
