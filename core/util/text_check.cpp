#include "core/util/text_check.h"

#include <cstdint>
#include <cstdio>

#include "core/util/error.h"

namespace remat {

namespace {

std::string hex(unsigned char c) {
  char b[8];
  std::snprintf(b, sizeof b, "0x%02x", c);
  return b;
}

// The length of the UTF-8 sequence at s[i], or 0 when it is not one.
std::size_t sequence_at(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  std::uint32_t cp = 0, lowest = 0;
  if ((c & 0xe0) == 0xc0) n = 2, cp = c & 0x1f, lowest = 0x80;
  else if ((c & 0xf0) == 0xe0) n = 3, cp = c & 0x0f, lowest = 0x800;
  else if ((c & 0xf8) == 0xf0) n = 4, cp = c & 0x07, lowest = 0x10000;
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  if (cp < lowest || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

}  // namespace

std::string text_problem(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '\0') return "holds a NUL byte at offset " + std::to_string(i);
    const std::size_t n = sequence_at(s, i);
    if (n == 0)
      return "is not valid UTF-8 (byte " + hex(static_cast<unsigned char>(s[i])) + " at offset " + std::to_string(i) + ")";
    i += n;
  }
  return {};
}

void require_text(std::string_view s, const std::string& what) {
  std::string p = text_problem(s);
  if (!p.empty()) throw Error(what + " " + p);
}

}  // namespace remat
