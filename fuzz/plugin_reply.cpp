// What a policy plugin's child process sends back (core/plugin/child_reply.h), decoded as the
// parent decodes it, then read both ways the parent reads a reply: a load probe's declarations
// (checked as the registry checks them) and a plan's schedule (validated against GPT-2).
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/graph/block_graph.h"
#include "core/plugin/child_reply.h"
#include "core/plugin/plugin_probe.h"
#include "core/schedule/schedule.h"
#include "core/schedule/validator.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/targets.h"

namespace remat::fuzz {

void plugin_reply(const std::uint8_t* data, std::size_t size) {
  static const std::unique_ptr<BlockGraph> graph = [] {
    ModelConfig m;
    m.name = "fuzz";
    m.layers = 4;
    m.dropout = 0.1;
    return std::make_unique<BlockGraph>(m);
  }();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  nlohmann::json ok;
  try {
    ok = decode_child_reply(bytes, "plan reply");
  } catch (const Error&) {
    return;
  }
  refused_or_accepted([&] { check_declaration(declaration_from_reply(ok)); });
  refused_or_accepted([&] { validate_schedule(schedule_from_json(ok), *graph); });
}

}  // namespace remat::fuzz
