// Reading what a user hands us: only regular files, bounded in size; JSON parsed in time and
// memory linear in its text, bounded in nesting depth and in the memory its values take, refused
// with trailing bytes; values quoted in messages without dumping a whole tree.
#pragma once
#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/limits.h"

namespace remat {

// The whole of `path`, which must be a regular file (no FIFO, device or directory: checked
// without blocking) of at most `max_bytes`. Errors start with `path`.
std::string read_regular_file(const std::string& path, std::uint64_t max_bytes);
// Throws Error unless `path` names a regular file (following symlinks); never blocks.
void require_regular_file(const std::string& path);
// The same check, keeping the file open: a read-only descriptor the caller closes, and its stat.
int open_regular_file(const std::string& path, struct stat& st);
// LimitError naming `path` when the file's `size` is past the `max_bytes` its reader accepts.
void require_file_size_at_most(const std::string& path, std::uint64_t size, std::uint64_t max_bytes);

// Parses `text` as one JSON document, in time and memory linear in its size (nlohmann's SAX
// parser and a document builder of ours). Nesting deeper than limits::kJsonDepth, text longer than
// limits::kJsonFileBytes and values needing more memory than the host has available (counted as
// they are built, about 16 to 64 bytes per value) are a LimitError; bad syntax or bytes after the
// document an Error. Both start with `where`. Duplicate keys: the last one wins.
nlohmann::json parse_json(std::string_view text, const std::string& where);
// parse_json with a bound of `max_value_bytes` on the memory its values take, in place of what
// the host has available.
nlohmann::json parse_json(std::string_view text, const std::string& where, std::uint64_t max_value_bytes);
// read_regular_file + parse_json, bounded by limits::kJsonFileBytes.
nlohmann::json read_json_file(const std::string& path);

// Keys from the top of a document to an array: {} is the document itself, {"traceEvents"} the
// array under that key of the top-level object.
using JsonPath = std::vector<std::string>;
// Called with the index of the path in `streamed`, the element's index in its array, the element.
using JsonElementFn = std::function<void(std::size_t path, std::size_t index, nlohmann::json&& element)>;
// parse_json, except that each element of an array at one of the `streamed` paths goes to `each`
// as soon as it is complete and is not kept: memory holds one element and the rest of the
// document. Those arrays are left empty in what it returns. An exception from `each` ends the
// parse. A streamed path that occurs twice (a repeated key) is an Error.
nlohmann::json parse_json_streaming(std::string_view text, const std::string& where,
                                    const std::vector<JsonPath>& streamed, const JsonElementFn& each);
// parse_json_streaming of the regular file `path` (at most limits::kJsonFileBytes), read a
// megabyte at a time as the parser goes: memory holds one element, the rest of the document and
// the buffer, never the whole text.
nlohmann::json read_json_file_streaming(const std::string& path, const std::vector<JsonPath>& streamed,
                                        const JsonElementFn& each);

// Takes the elements of streamed arrays as parse events, no value built for them: nlohmann's SAX
// calls for one element (a scalar, or an object or array from its start to its end) between
// begin_element and end_element. The parser checks the syntax, the nesting depth (the element's
// levels counted with those around it) and the size of the file; what a sink keeps is its own to
// bound. Its return values are not read: a sink ends the parse by throwing. parse_error is never
// called on it.
class JsonElementSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  // Element `index` of the array at `path`, an index into the `streamed` paths.
  virtual void begin_element(std::size_t path, std::size_t index) = 0;
  virtual void end_element() = 0;
  bool binary(binary_t&) override { return true; }  // never in JSON text
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};
// read_json_file_streaming with the elements going to `sink` as parse events: memory holds none
// of them, only what the sink keeps.
nlohmann::json read_json_file_streaming(const std::string& path, const std::vector<JsonPath>& streamed,
                                        JsonElementSax& sink);

// A short quotation of `v` for a message: its JSON, cut at 80 characters with what was cut
// (an array's or object's size, a string's length). For values read through parse_json.
std::string json_snippet(const nlohmann::json& v);

// Field `key` of the object `j` when it is a string, `fallback` when it is absent; an Error
// naming `where` and the field when it is there but not a string.
std::string json_string(const nlohmann::json& j, const char* key, const std::string& fallback, const std::string& where);

// Whether field `key` of the object `j` is the string `expected` (false when absent or of
// another type): how a reader tells its own files by their "format".
bool json_string_is(const nlohmann::json& j, const char* key, std::string_view expected);

// An integer field of `j` narrowed to int: ConfigError naming `field` when it is not an
// integer or does not fit.
int json_int(const nlohmann::json& v, const std::string& field);
// A boolean / a number (as double): ConfigError naming `field` ("must be true or false" / "must
// be a number", with the value) otherwise.
bool json_bool(const nlohmann::json& v, const std::string& field);
double json_number(const nlohmann::json& v, const std::string& field);

}  // namespace remat
