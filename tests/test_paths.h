// Where the unit tests find the source tree's data, the build tree's binaries and plugins. The
// paths live in one generated file (test_paths.cpp, configured from tests/test_paths.cpp.in)
// linked into each test binary, and this header is included into every test source by the
// build (-include), so the names below are available as they were when they were compile
// definitions; another checkout's paths recompile that one file alone.
#pragma once

namespace remat::test_paths {
const char* test_data_dir();      // tests/data
const char* source_dir();         // the source tree
const char* build_dir();          // the build tree
}  // namespace remat::test_paths

#define REMAT_TEST_DATA_DIR (::remat::test_paths::test_data_dir())
#define REMAT_SOURCE_DIR (::remat::test_paths::source_dir())
#define REMAT_BUILD_DIR (::remat::test_paths::build_dir())
