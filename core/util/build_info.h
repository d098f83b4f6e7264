// What this build is: its version, its commit and the source tree's resources. The values live in
// one generated file (build_info.cpp, configured from core/util/build_info.cpp.in), so a new
// commit or another checkout's path recompiles that file alone.
#pragma once

namespace remat {

const char* build_version();
const char* build_commit();
// The resources of the source tree this library was built from (used when no installed
// share/rematlab is found next to the binaries).
const char* build_source_share_dir();

}  // namespace remat
