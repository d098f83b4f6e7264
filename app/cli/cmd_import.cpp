// rematlab-batch import: a torch.cuda memory snapshot or a torch.profiler trace as a run
// directory, which compare, export and the desktop app then read like any run.
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "commands.h"
#include "core/trace/import_trace.h"
#include "core/trace/output_dir.h"
#include "core/trace/run_dir.h"
#include "core/util/error.h"

namespace remat::cli {

namespace {

struct ImportOptions {
  std::string file, out;
  bool force = false, json = false;
};

int import_file(const ImportOptions& o) {
  check_output_dir(o.out, o.force);  // before the work: a directory in the way is said at once
  Trace t = import_trace_file(o.file);
  write_run_dir(t, o.out, o.force, true);
  if (o.json) {
    std::cout << nlohmann::json({{"file", o.file}, {"dir", o.out}, {"source", t.source},
                                 {"memory_events", t.events.size()}, {"ops", t.ops.size()},
                                 {"peak_bytes", t.peak_bytes}, {"peak_reserved_bytes", t.peak_reserved_bytes}})
                     .dump(2)
              << "\n";
  } else {
    std::cout << o.out << ": " << t.source << ", " << t.events.size() << " memory events, " << t.ops.size()
              << " ops, peak " << human_bytes(t.peak_bytes) << " (reserved " << human_bytes(t.peak_reserved_bytes)
              << ")\n";
  }
  return 0;
}

}  // namespace

void add_import_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ImportOptions>();
  CLI::App* c = app.add_subcommand(
      "import", "write a torch.cuda memory snapshot (.pickle) or a torch.profiler trace (.json) as a run directory");
  c->add_option("file", o->file, "torch.cuda.memory._dump_snapshot pickle or torch.profiler export_chrome_trace JSON")
      ->required()
      ->check(non_empty_path());
  c->add_option("--out,-o", o->out, "the run directory to write")->required()->check(non_empty_path());
  c->add_flag("--force", o->force, "replace an existing run directory of ours");
  c->add_flag("--json", o->json, "print what was imported as JSON");
  c->callback([o, &exit_code] {
    try {
      exit_code = import_file(*o);
    } catch (const std::exception& e) {
      exit_code = fail(e);
    }
  });
}

}  // namespace remat::cli
