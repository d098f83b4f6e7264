// What the fuzz targets share: a scratch directory of this process, files written into it, and
// the rule every target checks: an input is accepted or refused with remat::Error; any other
// exception escapes (libFuzzer reports it as a crash), and so does every sanitizer report.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/util/error.h"

namespace remat::fuzz {

// A directory of this process in /dev/shm (else the system temporary directory), removed at exit.
const std::string& scratch_dir();
// scratch_dir()/name.
std::string scratch_path(const std::string& name);
// Writes the bytes to path, replacing it; aborts when it cannot (not a finding of the input).
void write_file(const std::string& path, const std::uint8_t* data, std::size_t size);
void write_file(const std::string& path, const std::string& s);
// The whole file; aborts when it cannot be read.
std::string read_file(const std::string& path);

// Runs f; a remat::Error means the input was refused, which is fine.
template <class F>
void refused_or_accepted(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

}  // namespace remat::fuzz
