// Untrusted text (a plugin's name, what a child process sent) shown in a message: control and
// non-ASCII bytes escaped (\n, \xNN), at most `max` bytes of it, "..." when cut.
#pragma once
#include <cstddef>
#include <string>

namespace remat {

std::string printable(const std::string& text, std::size_t max = 80);

}  // namespace remat
