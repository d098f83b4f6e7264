// Reading what a user hands us: only regular files, bounded in size; JSON bounded in nesting
// depth and refused with trailing bytes; values quoted in messages without dumping a whole tree.
#pragma once
#include <sys/stat.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/util/limits.h"

namespace remat {

// The whole of `path`, which must be a regular file (no FIFO, device or directory: checked
// without blocking) of at most `max_bytes`. Errors start with `path`.
std::string read_regular_file(const std::string& path, std::uint64_t max_bytes);
// Throws Error unless `path` names a regular file (following symlinks); never blocks.
void require_regular_file(const std::string& path);
// The same check, keeping the file open: a read-only descriptor the caller closes, and its stat.
int open_regular_file(const std::string& path, struct stat& st);

// Parses `text` as one JSON document: nesting deeper than limits::kJsonDepth is a LimitError,
// bad syntax or bytes after the document an Error; both start with `where`.
nlohmann::json parse_json(const std::string& text, const std::string& where);
// read_regular_file + parse_json, bounded by limits::kJsonFileBytes.
nlohmann::json read_json_file(const std::string& path);

// A short quotation of `v` for a message: its JSON, cut at 80 characters with what was cut
// (an array's or object's size, a string's length). For values read through parse_json.
std::string json_snippet(const nlohmann::json& v);

// An integer field of `j` narrowed to int: ConfigError naming `field` when it is not an
// integer or does not fit.
int json_int(const nlohmann::json& v, const std::string& field);

}  // namespace remat
