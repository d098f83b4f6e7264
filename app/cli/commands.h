// The subcommands of rematlab-batch. Each registers its options and a callback that sets the
// exit code.
#pragma once
#include <CLI/CLI.hpp>

namespace remat::cli {

void add_run_command(CLI::App& app, int& exit_code);
void add_plan_command(CLI::App& app, int& exit_code);
void add_list_command(CLI::App& app, int& exit_code);
void add_sweep_command(CLI::App& app, int& exit_code);
void add_compare_command(CLI::App& app, int& exit_code);
void add_export_command(CLI::App& app, int& exit_code);
void add_clean_command(CLI::App& app, int& exit_code);
void add_import_command(CLI::App& app, int& exit_code);
void add_diff_command(CLI::App& app, int& exit_code);
void add_frontier_command(CLI::App& app, int& exit_code);

}  // namespace remat::cli
