// Text we can write back: run directories hold names and paths in UTF-8 JSON and CSV, which
// cannot carry invalid UTF-8 (nlohmann refuses to write it) and whose readers refuse NUL bytes.
// Checked where such text is read from the user, so a bad byte is refused before the work.
#pragma once
#include <string>
#include <string_view>

namespace remat {

// What keeps `s` from being written: "" when nothing, else e.g. "holds a NUL byte at offset 3" or
// "is not valid UTF-8 (byte 0xff at offset 3)". UTF-8 as RFC 3629 has it: no overlong forms,
// no surrogates, nothing past U+10FFFF.
std::string text_problem(std::string_view s);

// Throws Error("WHAT PROBLEM") when `s` has a problem; `what` names where it was read.
void require_text(std::string_view s, const std::string& what);

}  // namespace remat
