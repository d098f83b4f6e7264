// Importing a big torch memory snapshot: about a million memory events (1.5 million trace entries) written by
// tests/data/torch/make_fixtures.py --big (python3, standard library), then the pickle read,
// the conversion to a Trace, the run directory written and read back. Prints the time of each
// part and the sizes; with --max-s S, exits 1 when reading plus converting takes longer than S.
//
//   torch_import_bench [--entries N] [--file PATH] [--max-s S]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "core/io/pickle_reader.h"
#include "core/trace/run_dir.h"
#include "core/trace/torch_snapshot.h"
#include "core/util/json_io.h"
#include "core/util/limits.h"

namespace fs = std::filesystem;
using namespace remat;

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int main(int argc, char** argv) {
  long entries = 1500000;  // about a million memory events (a free is two entries)
  std::string file;
  double max_s = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--entries") entries = std::atol(argv[i + 1]);
    else if (a == "--file") file = argv[i + 1];
    else if (a == "--max-s") max_s = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: torch_import_bench [--entries N] [--file PATH] [--max-s S]\n");
      return 2;
    }
  }
  const fs::path tmp = fs::temp_directory_path() / ("remat_import_bench_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  try {
    if (file.empty()) {
      file = (tmp / "big.pickle").string();
      const std::string cmd = "/usr/bin/python3 " REMAT_SOURCE_DIR "/tests/data/torch/make_fixtures.py --big " +
                              std::to_string(entries) + " " + file;
      double t = now_s();
      if (std::system(cmd.c_str()) != 0) throw Error("could not run: " + cmd);
      std::printf("generate (python)   %7.3f s\n", now_s() - t);
    }
    double t0 = now_s();
    const std::string data = read_regular_file(file, limits::kPickleFileBytes);
    double t1 = now_s();
    pickle::Document doc = pickle::parse(data, file);
    double t2 = now_s();
    Trace tr = trace_from_torch_snapshot(doc, file);
    double t3 = now_s();
    const std::string dir = (tmp / "run").string();
    write_run_dir(tr, dir, false);
    double t4 = now_s();
    Trace back = read_run_dir(dir);
    double t5 = now_s();
    std::printf("file                %7.1f MiB, %zu memory events\n", static_cast<double>(data.size()) / (1 << 20),
                tr.events.size());
    std::printf("read file           %7.3f s\n", t1 - t0);
    std::printf("parse pickle        %7.3f s\n", t2 - t1);
    std::printf("convert             %7.3f s\n", t3 - t2);
    std::printf("import (sum)        %7.3f s\n", t3 - t0);
    std::printf("write run dir       %7.3f s\n", t4 - t3);
    std::printf("read run dir back   %7.3f s (%zu events)\n", t5 - t4, back.events.size());
    fs::remove_all(tmp);
    if (max_s > 0 && t3 - t0 > max_s) {
      std::printf("slower than --max-s %.2f\n", max_s);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_import_bench: %s\n", e.what());
    fs::remove_all(tmp);
    return 1;
  }
  return 0;
}
