// What RematLab may delete or replace, and how it puts a finished directory into place.
//
// Only its own output directories: a run directory (summary.json of format "rematlab-run"), a
// sweep directory (sweep.json of format "rematlab-sweep") or the directory of a run of several
// ranks (ranks.json of format "rematlab-ranks"), with a format version this program
// knows, holding nothing but the files such a directory holds. Anything else is refused, even
// with --force, with a message saying why (docs/trace-format.md, "Writing").
//
// An output directory is written under a temporary name next to its target,
// `.NAME.tmp-PID-N`, which holds a marker file until it is complete, and is then moved into
// place: without force by a rename that never replaces anything (renameat2 RENAME_NOREPLACE),
// with force by an atomic exchange with the old directory (RENAME_EXCHANGE), after which the old
// contents are checked again before they are deleted. Filesystems without these flags get a
// checked two-step rename (the old directory goes to `.NAME.old-PID-N` first).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/trace/schema.h"

namespace remat {

inline constexpr const char* kComparisonFile = "comparison.csv";
// In a temporary directory while it is being written: {"format": ..., "format_version": ...}.
inline constexpr const char* kWritingMarkerFile = ".rematlab-writing";

// Ranks: ranks.json over one run directory per rank (rank-0/, rank-1/, ...).
enum class OutputKind { Run, Sweep, Ranks };

// Why `dir` is not an output directory of ours that may be deleted or replaced; empty when it
// is (an empty directory is too: there is nothing to lose). The reason names the file.
std::string why_not_ours(const std::string& dir);

// Whether `name` is one of the files an output directory holds (summary.json, ops.csv, ...).
bool is_output_file_name(const std::string& name);

// Deletes a directory that why_not_ours accepted, its marker rewritten first and removed last,
// so that an interrupted deletion leaves a leftover that is still recognisably ours. Errors are
// ignored: what stays is such a leftover.
void remove_ours(const std::string& dir);

// Throws Error when `dir` exists and force is false; when it exists and is not a directory, or is
// not ours (why_not_ours), even with force; and when its parent cannot be created or written.
// Leaves nothing behind but the parent directories it created. An empty name is refused.
void check_output_dir(const std::string& dir, bool force);

// Creates the temporary directory of `dir` (with its marker) and returns its path.
std::string make_temp_dir(const std::string& dir, OutputKind kind = OutputKind::Run);

// What the tests change in commit_temp_dir.
struct CommitSeams {
  bool two_step = false;               // the fallback of filesystems without renameat2 flags
  std::function<void()> before_rename;  // runs once, after the checks, right before the first rename
};

// Moves the complete temporary directory `tmp` (from make_temp_dir) to `dir`. Without force
// nothing is ever replaced; with force only a directory that is ours at that moment is (checked
// before and, after the exchange, again before it is deleted). When the target cannot be taken
// (it appeared meanwhile, or is not ours any more) the result is kept under `NAME-2`, `NAME-3`...
// next to it and Error says where; it is never deleted.
void commit_temp_dir(const std::string& tmp, const std::string& dir, bool force = false,
                     const CommitSeams& seams = {});

// ------------------------------------------------------------------ leftovers (leftovers.cpp)

// What an interrupted write leaves (docs/batch.md, clean):
// - Dir: `.NAME.tmp-PID-N` (an output directory being written, or after an exchange the old
//   contents being deleted) or `.NAME.old-PID-N` (the old directory during a two-step replace);
// - File: the temporary file of a file being written, `.NAME.tmp-PID-N` (output_file.h), or of
//   earlier versions `NAME.tmp-PID` (a run directory's files, an export) and `NAME.partial-PID`
//   (weights and gradients);
// - Scratch: `rematlab-dp-PID`, the rendezvous directory of a `run --dp/--tp/--pp` launcher.
struct Leftover {
  enum class Kind { Dir, File, Scratch };
  Kind kind = Kind::Dir;
  std::string path;    // the leftover itself
  std::string target;  // what it was written for, next to it (empty for Scratch)
  long pid = 0;        // the process that wrote it
};

// `path` as a leftover, when its name is one (nothing is read).
std::optional<Leftover> parse_leftover(const std::string& path);
// The leftovers directly in `dir`, by name.
std::vector<Leftover> leftovers_in(const std::string& dir);
// The leftovers of `dir` next to it, and those in it (the runs of a sweep), by name. `dir` need
// not exist (a write killed before it moved into place leaves only the leftover).
std::vector<Leftover> leftovers_around(const std::string& dir);
bool process_alive(long pid);
// Why `l` may not be deleted now: its process is still running, or it is not ours (a
// directory by why_not_ours; a file must be a regular file with one link, an old weights file
// empty or begun as safetensors are; a launcher's directory must hold nothing but its
// rendezvous files and its runs); empty when it may.
std::string why_keep(const Leftover& l);
// Deletes a leftover that why_keep accepted (a directory as remove_ours does).
void remove_leftover(const Leftover& l);
// One line for a user: what the leftover is and how to remove it.
std::string describe(const Leftover& l);

}  // namespace remat
