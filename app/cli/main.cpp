// rematlab-batch: what activation checkpointing costs, headless.
#include <csignal>
#include <iostream>

#include "commands.h"
#include "core/trace/summary.h"
#include "core/util/printable.h"
#include "core/util/text_check.h"
#include "training.h"

int main(int argc, char** argv) {
  CLI::App app{"rematlab-batch: run a transformer training step under checkpoint policies and "
               "measure memory and compute"};
  app.set_version_flag("--version", "rematlab-batch " + remat::program_version() + " (" +
                                        remat::program_commit() + ")");
  app.require_subcommand(1);
  int code = 0;
  remat::cli::add_run_command(app, code);
  remat::cli::add_plan_command(app, code);
  remat::cli::add_list_command(app, code);
  remat::cli::add_sweep_command(app, code);
  remat::cli::add_compare_command(app, code);
  remat::cli::add_export_command(app, code);
  remat::cli::add_clean_command(app, code);
  remat::cli::add_import_command(app, code);
  remat::cli::add_diff_command(app, code);
  remat::cli::add_frontier_command(app, code);
  // Every argument is recorded (summary.json's provenance "command") and paths and names are
  // written into JSON and CSV: bytes those cannot hold are refused before any work.
  for (int i = 1; i < argc; ++i) {
    const std::string problem = remat::text_problem(argv[i]);
    if (!problem.empty()) {
      std::cerr << "rematlab-batch: argument " << i << " '" << remat::printable(argv[i], 120) << "' " << problem
                << "; names and paths must be UTF-8, as RematLab writes them into its JSON and CSV files\n";
      return 2;
    }
  }
  remat::cli::set_command_line(argc, argv);
  // A file size limit (ulimit -f) makes a write fail with EFBIG, which the writer reports with
  // the file's name, instead of killing the process with SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return code;
}
