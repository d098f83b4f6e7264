// rematlab-batch clean: delete what interrupted writes left behind (.NAME.tmp-PID-N and
// .NAME.old-PID-N next to run and sweep directories, the temporary files of files, a killed
// launcher's rendezvous directory: output_dir.h, Leftover), and only what is ours (why_keep),
// written by a process that is no longer running. A path inside a killed launcher's rendezvous
// directory cleans that directory.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>

#include "cli_common.h"
#include "commands.h"
#include "core/trace/output_dir.h"
#include "core/util/error.h"

namespace fs = std::filesystem;

namespace remat::cli {

namespace {

struct CleanOptions {
  std::vector<std::string> paths;
  bool dry_run = false, json = false;
};

// The killed launcher's rendezvous directory (rematlab-dp-PID) `path` lies in, such as the
// `store` its ranks named; whether it is removed is decided as for the directory itself (kept,
// saying why, when it is not RematLab's or its launcher still runs). Only that kind: a path
// inside a partly written run or sweep directory is not taken to mean all of it.
std::optional<Leftover> enclosing_leftover(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec).lexically_normal();
  if (ec) return std::nullopt;
  if (!p.has_filename()) p = p.parent_path();
  for (fs::path up = p.parent_path(); up.has_relative_path(); up = up.parent_path()) {
    const std::optional<Leftover> l = parse_leftover(up.string());
    if (l && l->kind == Leftover::Kind::Scratch && fs::is_directory(fs::symlink_status(up, ec))) return l;
  }
  return std::nullopt;
}

int clean(const CleanOptions& o) {
  std::vector<Leftover> found;
  std::set<std::string> seen;
  for (const auto& p : o.paths) {
    std::error_code ec;
    std::vector<Leftover> here;
    if (auto up = parse_leftover(p) ? std::nullopt : enclosing_leftover(p)) {
      here.push_back(*up);
    } else if (!fs::exists(fs::symlink_status(p, ec))) {
      // A write killed before it moved into place leaves only its leftover next to the name.
      here = leftovers_around(p);
      if (here.empty()) throw Error("'" + p + "' does not exist, and nothing next to it is left over from writing it");
    } else if (auto l = parse_leftover(p)) {
      here.push_back(*l);
    } else if (fs::is_directory(fs::symlink_status(p, ec))) {
      here = leftovers_around(p);
    } else {
      throw Error("'" + p + "' is neither a directory nor a leftover of an interrupted write");
    }
    for (auto& l : here) {
      // One leftover named twice (as itself and through a path inside it) is one.
      const fs::path key = fs::weakly_canonical(l.path, ec);
      if (seen.insert(ec ? l.path : key.string()).second) found.push_back(std::move(l));
    }
  }
  nlohmann::json removed = nlohmann::json::array(), kept = nlohmann::json::array();
  bool refused = false;
  for (const auto& l : found) {
    std::string why = why_keep(l);
    if (why.empty() && !o.dry_run) {
      remove_leftover(l);
      std::error_code ec;
      if (fs::exists(fs::symlink_status(l.path, ec))) why = "cannot remove it (permissions?)";
    }
    if (why.empty()) {
      removed.push_back(l.path);
      if (!o.json) std::cout << (o.dry_run ? "would remove " : "removed ") << l.path << "\n";
    } else {
      // A running writer's directory is not refused, only not yet removable.
      refused = refused || !process_alive(l.pid);
      kept.push_back({{"path", l.path}, {"reason", why}});
      if (!o.json) std::cout << "kept " << l.path << ": " << why << "\n";
    }
  }
  if (o.json)
    std::cout << nlohmann::json({{"dry_run", o.dry_run}, {"removed", removed}, {"kept", kept}}).dump(2) << "\n";
  else if (found.empty())
    std::cout << "no leftovers of interrupted writes\n";
  if (refused) return fail("some leftovers are not RematLab's own or could not be removed (see above); they were kept");
  return 0;
}

}  // namespace

void add_clean_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CleanOptions>();
  CLI::App* c = app.add_subcommand(
      "clean", "delete what interrupted writes left next to run and sweep directories (only RematLab's own)");
  c->add_option("paths", o->paths,
                "directories holding run or sweep directories (or those directories, or a leftover itself)")
      ->required()
      ->check(non_empty_path());
  c->add_flag("--dry-run,-n", o->dry_run, "list what would be removed, remove nothing");
  c->add_flag("--json", o->json, "print what was removed and what was kept as JSON");
  c->callback([o, &exit_code] {
    try {
      exit_code = clean(*o);
    } catch (const std::exception& e) {
      exit_code = fail(e.what());
    }
  });
}

}  // namespace remat::cli
