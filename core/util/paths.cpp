#include "core/util/paths.h"

#include "core/util/build_info.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <dlfcn.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace remat {

std::string executable_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return fs::path(buf).parent_path().string();
}

std::string resource_dir() {
  if (const char* env = std::getenv("REMAT_RESOURCE_DIR"); env && *env) return env;
  fs::path installed = fs::path(executable_dir()) / ".." / "share" / "rematlab";
  std::error_code ec;
  if (fs::exists(installed / "presets", ec)) return fs::weakly_canonical(installed, ec).string();
  return build_source_share_dir();
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(resource_dir()) / "presets", ec))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string preset_path(const std::string& name) {
  fs::path p = fs::path(resource_dir()) / "presets" / (name + ".json");
  std::error_code ec;
  return fs::exists(p, ec) ? p.string() : std::string();
}

std::string default_corpus_path() { return (fs::path(resource_dir()) / "corpus.txt").string(); }

std::string library_dir() {
  fs::path p = fs::path(executable_dir()) / ".." / "lib";
  std::error_code ec;
  return fs::weakly_canonical(p, ec).string();
}

void* open_own_library(const std::string& file, std::string& error) {
  error.clear();
  for (const std::string& c : {library_dir() + "/" + file, file}) {
    if (c.find('/') != std::string::npos && !fs::exists(c)) continue;
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = dlerror();
    error = e ? e : "unknown error";
  }
  return nullptr;
}

}  // namespace remat
