// What a policy plugin declares (name, description, parameters), learnt once by probing its
// file in a child process (core/plugin/child_process.h): the child loads the library, fetches
// the entry point, checks the ABI version, creates the policy and reads its declarations. A
// library that crashes in its static initializers, hangs, throws or is not a plugin fails the
// probe; the program itself only loads files that passed, and never asks the plugin again.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/plugin/policy.h"

namespace remat {

struct PolicyDeclaration {
  std::string name;
  std::string description;
  std::vector<ParamDecl> params;
  bool takes_memory_budget = false;
};

// How long a probe may take (loading, static initializers, factory, declarations).
constexpr double kPluginProbeTimeoutS = 30;

// Probes the plugin at `path`. Throws Error with the reason it cannot be used: "cannot be
// loaded: ...", "not a RematLab policy plugin ...", "built for policy ABI version ...", "its
// factory failed: ...", "its description() failed: ...", "its load probe crashed (signal ...)".
PolicyDeclaration probe_plugin(const std::string& path, double timeout_s = kPluginProbeTimeoutS);
// The declarations in a probe's reply (what the child sent); Error when they cannot be read.
PolicyDeclaration declaration_from_reply(const nlohmann::json& j);

// Names a user can type in `--policy name:key=value,key=value`: 1 to 64 of a-z, 0-9, '_', '-'.
bool is_choosable_name(const std::string& name);
// Throws Error when the policy name, a parameter name or a choice of the declaration could
// never be given on the command line (or a parameter is declared twice).
void check_declaration(const PolicyDeclaration& d);

}  // namespace remat
