#include "core/plugin/child_reply.h"

#include <nlohmann/json.hpp>

#include "core/plugin/child_process.h"
#include "core/util/error.h"
#include "core/util/json_io.h"
#include "core/util/printable.h"

namespace remat {

nlohmann::json decode_child_reply(const std::string& data, const std::string& reply_name) {
  nlohmann::json j;
  std::string why;
  try {
    j = parse_json(data, reply_name);
  } catch (const Error& e) {
    why = std::string(" (") + e.what() + ")";
  }
  if (!why.empty() || !j.is_object() || !j.contains(kChildReplyMarker) || (!j.contains("ok") && !j.contains("error")))
    throw ChildProcessError("it sent something that is not a " + reply_name + ": '" + printable(data, 60) + "'" + why);
  if (j.contains("error")) {
    const auto& e = j["error"];
    throw Error(e.is_string() ? e.get<std::string>() : json_snippet(e));
  }
  return std::move(j["ok"]);
}

}  // namespace remat
