#include "core/util/printable.h"

#include <cstdio>

namespace remat {

std::string printable(const std::string& text, std::size_t max) {
  std::string out;
  for (char c : text.substr(0, max)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", u);
      out += b;
    }
  }
  return out + (text.size() > max ? "..." : "");
}

}  // namespace remat
