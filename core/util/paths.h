// Where the program's files are: plugins next to the binaries, presets and the corpus in
// share/rematlab (installed tree or build tree; REMAT_RESOURCE_DIR overrides).
#pragma once
#include <string>
#include <vector>

namespace remat {

std::string executable_dir();
std::string resource_dir();
std::vector<std::string> preset_names();
std::string preset_path(const std::string& name);  // empty if there is none
std::string default_corpus_path();
// Library directory of this installation (for the CUDA backend and NCCL libraries).
std::string library_dir();
// dlopens one of this installation's own libraries (RTLD_NOW | RTLD_LOCAL): `file` in
// library_dir(), else by name on the loader's path. nullptr when neither loads, with dlerror's
// text in `error`, or `error` empty when the file is in neither place.
void* open_own_library(const std::string& file, std::string& error);

}  // namespace remat
