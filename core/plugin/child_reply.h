// What a child process sends back over its pipe (core/plugin/child_process.h):
// {"remat_child_reply": 1, "ok": value} or {"remat_child_reply": 1, "error": "message"}. The
// bytes come from plugin code, so they are read as any user file is: parse_json (linear time,
// bounded nesting: a reply of 10^6 '[' is refused, not a stack overflow of the parent).
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace remat {

inline constexpr const char* kChildReplyMarker = "remat_child_reply";

// The "ok" value of `data`. Throws Error with the work's message for an "error" reply, and
// ChildProcessError "it sent something that is not a REPLY_NAME: '...'" for anything else.
nlohmann::json decode_child_reply(const std::string& data, const std::string& reply_name);

}  // namespace remat
