#include "core/schedule/schedule.h"

#include <algorithm>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/json_io.h"

namespace remat {

const char* to_string(ActionKind k) {
  static const char* n[] = {"forward", "recompute", "backward", "offload", "prefetch", "drop"};
  return n[static_cast<int>(k)];
}

std::string Keep::to_string() const {
  switch (kind) {
    case KeepKind::All: return "all";
    case KeepKind::Input: return "input";
    case KeepKind::None: return "none";
    case KeepKind::Named: {
      std::string s;
      for (const auto& n : *names) s += (s.empty() ? "" : ",") + n;
      return s.empty() ? "[]" : s;
    }
  }
  return "?";
}

bool needs_version2(const Action& a) {
  const bool named = a.keep.kind == KeepKind::Named && !a.keep.names->empty();
  return named && (a.kind == ActionKind::Backward || a.kind == ActionKind::Offload || a.kind == ActionKind::Prefetch);
}

bool starts_backward_sweep(const Action& a, bool forwarded) {
  return a.kind == ActionKind::Backward || a.kind == ActionKind::Recompute ||
         a.kind == ActionKind::Prefetch || (a.kind == ActionKind::Forward && forwarded);
}

std::size_t forward_sweep_end(const Schedule& s) {
  std::vector<bool> forwarded(static_cast<std::size_t>(std::max(s.blocks, 0)), false);
  for (std::size_t i = 0; i < s.actions.size(); ++i) {
    const Action& a = s.actions[i];
    const bool known = a.block >= 0 && a.block < s.blocks;
    if (starts_backward_sweep(a, known && forwarded[static_cast<std::size_t>(a.block)])) return i;
    if (known && a.kind == ActionKind::Forward) forwarded[static_cast<std::size_t>(a.block)] = true;
  }
  return s.actions.size();
}

Schedule store_all_schedule(int blocks) {
  Schedule s;
  s.policy = "none";
  s.blocks = blocks;
  for (int b = 0; b < blocks; ++b) s.forward(b, Keep::all());
  for (int b = blocks - 1; b >= 0; --b) s.backward(b);
  return s;
}

nlohmann::json schedule_to_json(const Schedule& s) {
  nlohmann::json j;
  j["format"] = "rematlab-schedule";
  j["version"] = std::any_of(s.actions.begin(), s.actions.end(), needs_version2) ? 2 : 1;
  j["policy"] = s.policy;
  j["params"] = s.params;
  j["blocks"] = s.blocks;
  j["checkpoint_slots"] = s.checkpoint_slots;
  auto& a = j["actions"] = nlohmann::json::array();
  for (const auto& x : s.actions) {
    nlohmann::json e = {{"action", to_string(x.kind)}, {"block", x.block}};
    if (x.kind == ActionKind::Forward || x.kind == ActionKind::Recompute) {
      if (x.keep.kind == KeepKind::Named) e["keep"] = *x.keep.names;
      else e["keep"] = x.keep.to_string();
    } else if (needs_version2(x)) {
      e[x.kind == ActionKind::Backward ? "recompute" : "tensors"] = *x.keep.names;
    }
    a.push_back(std::move(e));
  }
  return j;
}

namespace {

// `rematlab-batch plan --json` prints the prediction with the schedule under "schedule".
const nlohmann::json& schedule_object(const nlohmann::json& in) {
  if (!in.is_object()) throw Error("schedule: expected a JSON object");
  return !in.contains("blocks") && in.contains("schedule") && in["schedule"].is_object() ? in["schedule"] : in;
}

// Everything but the actions, checked; `count` actions in the file.
Schedule schedule_header(const nlohmann::json& j) {
  if (!j.contains("actions") || !j["actions"].is_array())
    throw Error("schedule: missing the 'actions' array");
  if (!j.contains("blocks") || !j["blocks"].is_number_integer())
    throw Error("schedule: missing the integer 'blocks'");
  if (j.contains("format") && j["format"] != "rematlab-schedule")
    throw Error("schedule: format " + json_snippet(j["format"]) + " is not rematlab-schedule");
  if (j.contains("version") && j["version"] != 1 && j["version"] != 2)
    throw Error("schedule: version " + json_snippet(j["version"]) +
                " is not one this RematLab reads (1 or 2); a newer RematLab wrote it");
  auto str_field = [&](const char* k, const std::string& fallback) {
    if (!j.contains(k)) return fallback;
    if (!j[k].is_string()) throw Error(std::string("schedule: '") + k + "' must be a string, got " + json_snippet(j[k]));
    return j[k].get<std::string>();
  };
  Schedule s;
  s.policy = str_field("policy", "file");
  s.params = str_field("params", "");
  s.blocks = json_int(j["blocks"], "schedule: 'blocks'");
  if (s.blocks > limits::kLayers)
    throw LimitError("schedule: blocks " + std::to_string(s.blocks) + " is more than the " +
                     std::to_string(limits::kLayers) + " layers a model may have");
  s.checkpoint_slots = j.contains("checkpoint_slots") ? json_int(j["checkpoint_slots"], "schedule: 'checkpoint_slots'") : 0;
  s.version = !j.contains("version") ? 0 : j["version"] == 2 ? 2 : 1;  // checked above: 1 or 2 (1.0 too)
  return s;
}

// A version 1 file holds none of version 2's actions.
void check_version(const Schedule& s) {
  if (s.version != 1) return;
  for (std::size_t i = 0; i < s.actions.size(); ++i)
    if (needs_version2(s.actions[i]))
      throw Error("schedule: action " + std::to_string(i) + ": " + to_string(s.actions[i].kind) + " " +
                  std::to_string(s.actions[i].block) + " of the named tensors (" + s.actions[i].keep.to_string() +
                  ") is a version 2 action, and the file says version 1");
}

LimitError too_many_actions(std::size_t n) {
  return LimitError("schedule: " + std::to_string(n) + " actions, more than the " +
                    std::to_string(limits::kScheduleActions) + " a schedule may hold");
}

// Action `i` of the 'actions' array.
Action action_from_json(const nlohmann::json& e, std::size_t i) {
  auto bad = [&](const std::string& why) {
    throw Error("schedule: action " + std::to_string(i) + ": " + why + " (" + json_snippet(e) + ")");
  };
  if (!e.is_object() || !e.contains("action") || !e["action"].is_string()) bad("no 'action'");
  if (!e.contains("block") || !e["block"].is_number_integer()) bad("no integer 'block'");
  const std::string& a = e["action"].get_ref<const std::string&>();
  Action act;
  act.block = json_int(e["block"], "schedule: action " + std::to_string(i) + " block");
  bool found = false;
  for (int k = 0; k <= static_cast<int>(ActionKind::Drop); ++k)
    if (a == to_string(static_cast<ActionKind>(k))) {
      act.kind = static_cast<ActionKind>(k);
      found = true;
    }
  if (!found) bad("unknown action '" + a + "'");
  // Version 2: the tensors a backward rebuilds inside, or an offload or prefetch moves.
  const bool moves = act.kind == ActionKind::Offload || act.kind == ActionKind::Prefetch;
  const char* list = act.kind == ActionKind::Backward ? "recompute" : moves ? "tensors" : nullptr;
  for (const char* other : {"recompute", "tensors"})
    if (e.contains(other) && (!list || std::string(other) != list))
      bad(std::string("'") + other + "' belongs to " +
          (std::string(other) == "recompute" ? "a backward" : "an offload or prefetch"));
  if (list && e.contains(list)) {
    const auto& k = e[list];
    if (!k.is_array() || k.empty()) bad(std::string("'") + list + "' must be a non-empty list of tensor names");
    std::vector<std::string> names;
    for (const auto& n : k) {
      if (!n.is_string()) bad(std::string("'") + list + "' entries must be tensor names");
      names.push_back(n.get<std::string>());
    }
    if (e.contains("keep")) bad(std::string("give '") + list + "' or 'keep', not both");
    act.keep = Keep::named(std::move(names));
    return act;
  }
  if (e.contains("keep")) {
    const auto& k = e["keep"];
    if (k.is_string()) {
      const std::string& ks = k.get_ref<const std::string&>();
      if (ks == "all") act.keep = Keep::all();
      else if (ks == "input") act.keep = Keep::input();
      else if (ks == "none") act.keep = Keep::none();
      else bad("keep must be all, input, none or a list of tensor names");
    } else if (k.is_array()) {
      std::vector<std::string> names;
      for (const auto& n : k) {
        if (!n.is_string()) bad("keep list entries must be tensor names");
        names.push_back(n.get<std::string>());
      }
      act.keep = Keep::named(std::move(names));
    } else {
      bad("keep must be a string or a list");
    }
  }
  if (list) act.keep = Keep::all();  // a keep on these means nothing (version 1 ignored it too)
  return act;
}

}  // namespace

Schedule schedule_from_json(const nlohmann::json& in) {
  const nlohmann::json& j = schedule_object(in);
  Schedule s = schedule_header(j);
  const auto& actions = j["actions"];
  if (actions.size() > static_cast<std::size_t>(limits::kScheduleActions)) throw too_many_actions(actions.size());
  s.actions.reserve(actions.size());
  for (std::size_t i = 0; i < actions.size(); ++i) s.actions.push_back(action_from_json(actions[i], i));
  check_version(s);
  return s;
}

Schedule load_schedule_file(const std::string& path) {
  // The actions are read as the parser completes each one (a schedule may hold 10^7): those of
  // the top level and those of a `plan --json` output's "schedule", kept apart until the rest of
  // the file says which is the schedule; an action's error is reported after the header's.
  std::vector<Action> actions[2];
  std::exception_ptr error[2];
  const nlohmann::json top = read_json_file_streaming(
      path, {{"actions"}, {"schedule", "actions"}}, [&](std::size_t p, std::size_t i, nlohmann::json&& e) {
        if (error[p]) return;
        try {
          if (i >= static_cast<std::size_t>(limits::kScheduleActions)) throw too_many_actions(i + 1);
          actions[p].push_back(action_from_json(e, i));
        } catch (const Error&) {
          error[p] = std::current_exception();
          actions[p] = {};
        }
      });
  const nlohmann::json& j = schedule_object(top);
  const std::size_t which = &j == &top ? 0 : 1;
  Schedule s = schedule_header(j);
  if (error[which]) std::rethrow_exception(error[which]);
  s.actions = std::move(actions[which]);
  check_version(s);
  return s;
}

}  // namespace remat
