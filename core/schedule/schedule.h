// What a policy returns: an ordered list of actions over blocks 0..L-1.
//
//   forward  b keep   run block b from its input; produce its output (the next block's input)
//                     while something still needs it; afterwards keep only `keep` of its tensors
//   recompute b keep  rebuild the missing tensors of `keep` from what block b still holds
//   backward b        backpropagate through block b (needs its whole saved set on the device);
//                     frees everything block b holds
//   offload b         move every device tensor of block b to host memory
//   prefetch b        move them back
//   drop b            free everything block b holds
//
// keep is one of: all (the whole saved set), input (the block input, as a checkpoint), none,
// or a list of tensor names from the block table. A block input that is a checkpoint stays
// until the block's backward (or a drop).
//
// Schedule format version 2 adds, with a list of tensor names in `keep`:
//   backward b [names]  rebuild the named saved tensors inside the backward, each set just before
//                       the first backward step that reads it (with the other named tensors the
//                       same steps make), so they live only from there to their last reader;
//                       the block holds every other saved tensor, and none of the named ones
//   offload b [names]   move only the named device tensors of block b to host memory
//   prefetch b [names]  move only the named ones back
// Version 1 files (and schedules without these) keep reading and writing as version 1.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace remat {

enum class ActionKind : std::uint8_t { Forward, Recompute, Backward, Offload, Prefetch, Drop };
enum class KeepKind : std::uint8_t { All, Input, None, Named };
const char* to_string(ActionKind k);

struct Keep {
  KeepKind kind = KeepKind::All;
  std::shared_ptr<const std::vector<std::string>> names;  // for Named
  static Keep all() { return {KeepKind::All, nullptr}; }
  static Keep input() { return {KeepKind::Input, nullptr}; }
  static Keep none() { return {KeepKind::None, nullptr}; }
  static Keep named(std::vector<std::string> n) {
    return {KeepKind::Named, std::make_shared<const std::vector<std::string>>(std::move(n))};
  }
  std::string to_string() const;  // "all", "input", "none" or "a,b,c"
};

struct Action {
  ActionKind kind = ActionKind::Forward;
  int block = 0;
  Keep keep;
};

struct Schedule {
  std::string policy;          // who made it
  std::string params;          // its parameters as given, e.g. "segments=3"
  int blocks = 0;              // L
  int checkpoint_slots = 0;    // most block inputs kept as checkpoints at once; 0 = unlimited
  int version = 0;             // the format version a file stated (0: none, or not read from a file)
  std::vector<Action> actions;

  void forward(int b, Keep k = Keep::all()) { actions.push_back({ActionKind::Forward, b, std::move(k)}); }
  void recompute(int b, Keep k = Keep::all()) { actions.push_back({ActionKind::Recompute, b, std::move(k)}); }
  void backward(int b, Keep inside = Keep::all()) { actions.push_back({ActionKind::Backward, b, std::move(inside)}); }
  void offload(int b, Keep k = Keep::all()) { actions.push_back({ActionKind::Offload, b, std::move(k)}); }
  void prefetch(int b, Keep k = Keep::all()) { actions.push_back({ActionKind::Prefetch, b, std::move(k)}); }
  void drop(int b) { actions.push_back({ActionKind::Drop, b, Keep::all()}); }
};

// Whether `a` needs schedule format version 2: a backward that recomputes inside, an offload or
// prefetch of named tensors (a backward naming none is a plain one; an offload or prefetch
// naming none is refused by the rules).
bool needs_version2(const Action& a);

// Whether `a` belongs to the backward sweep: a backward, a recompute, a prefetch, or a forward
// of a block that has run forward before (`forwarded`). The forward sweep is the actions before
// the first such one: what each block holds then is what it saved, and on a pipeline stage those
// actions are a micro-batch's forward and the rest its backward.
bool starts_backward_sweep(const Action& a, bool forwarded);
// The index of the first action of the backward sweep (the number of actions when none).
std::size_t forward_sweep_end(const Schedule& s);

// The store-everything schedule: forward every block keeping all, then backward in reverse.
Schedule store_all_schedule(int blocks);

nlohmann::json schedule_to_json(const Schedule& s);
// Accepts a schedule object or the output of `plan --json` (the schedule under "schedule").
// Throws Error naming the bad entry.
Schedule schedule_from_json(const nlohmann::json& j);
Schedule load_schedule_file(const std::string& path);

}  // namespace remat
