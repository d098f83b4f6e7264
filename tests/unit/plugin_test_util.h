// Shared by the plugin registry tests: where the real and the broken plugins are built, a
// plugin directory of chosen broken plugins, and looking up what the registry rejected.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/plugin/registry.h"

namespace remat::test {

inline const std::string kPlugins = std::string(REMAT_BUILD_DIR) + "/bin/plugins";
inline const std::string kBroken = std::string(REMAT_BUILD_DIR) + "/test-plugins";

inline const RejectedPlugin* rejected(const PolicyRegistry& r, const std::string& file) {
  for (const auto& x : r.rejected())
    if (std::filesystem::path(x.file).filename() == file) return &x;
  return nullptr;
}

// The message of what `f` throws ("" when it does not throw).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// A temporary plugin directory, removed at the end of the test; `link` adds a symbolic link to
// one of the broken plugins (tests/plugins).
class PluginDir {
 public:
  PluginDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("remat_plugin_dir_" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~PluginDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  PluginDir(const PluginDir&) = delete;
  PluginDir& operator=(const PluginDir&) = delete;
  PluginDir& link(const std::string& broken_file) {
    std::filesystem::create_symlink(std::filesystem::path(kBroken) / broken_file, path_ / broken_file);
    return *this;
  }
  std::filesystem::path path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Sets an environment variable for the scope of a test; restores the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_, old_.c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace remat::test
