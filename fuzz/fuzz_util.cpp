#include "fuzz/fuzz_util.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace remat::fuzz {

namespace {

struct Scratch {
  std::string dir;
  Scratch() {
    // Memory-backed when there is /dev/shm: on ext4, rewriting a truncated file flushes it to
    // disk on close, which costs more than the input's run.
    std::error_code ec;
    fs::path base = fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0
                        ? fs::path("/dev/shm")
                        : fs::temp_directory_path();
    fs::path p = base / ("rematlab-fuzz-" + std::to_string(::getpid()));
    fs::remove_all(p, ec);
    if (!fs::create_directories(p, ec)) {
      std::cerr << "fuzz: cannot create " << p << ": " << ec.message() << "\n";
      std::abort();
    }
    dir = p.string();
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

}  // namespace

const std::string& scratch_dir() {
  static Scratch s;
  return s.dir;
}

std::string scratch_path(const std::string& name) { return (fs::path(scratch_dir()) / name).string(); }

void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::cerr << "fuzz: cannot write " << path << "\n";
    std::abort();
  }
}

void write_file(const std::string& path, const std::string& s) {
  write_file(path, reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) {
    std::cerr << "fuzz: cannot read " << path << "\n";
    std::abort();
  }
  return ss.str();
}

}  // namespace remat::fuzz
