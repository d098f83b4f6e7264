// A restricted reader of Python pickles that holds only data: None, bools, integers up to 64
// bits, floats, strings, bytes, lists, tuples and dicts, shared through the memo. Every opcode
// that would import a name or call something (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ,
// NEWOBJ, NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID, out-of-band buffers) is refused with its name
// and offset, so reading a file can never run code. Bounded by limits.h: nesting depth, memo
// entries (and no more of them than values built: one 16-byte entry per value at most), string
// length, file size, and the expansion of what is shared through the memo: a walk of the
// document, a shared container counted where each appears, visits at most
// kPickleExpansionPerByte values per byte of the file (plus kPickleExpansionFloor), so no
// reader of it amplifies the file past that. Sets are refused too (no snapshot holds one).
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat::pickle {

enum class Kind : std::uint8_t { None, Bool, Int, Float, String, Bytes, List, Tuple, Dict };
const char* to_string(Kind k);

// One value: scalars inline, strings and containers by index into their Document.
struct Value {
  Kind kind = Kind::None;
  union {
    bool b;
    std::int64_t i;
    double f;
    std::uint32_t index;  // String, Bytes: Document::strings; List, Tuple: lists; Dict: dicts
  };
  Value() : i(0) {}
};

struct Dict {
  std::vector<std::pair<Value, Value>> items;  // in the order they were set
};

// What a pickle holds. Containers are shared (a memo GET refers to the same one) and never
// cyclic: the reader refuses to change a container once it has been placed inside another.
class Document {
 public:
  const Value& root() const { return root_; }
  std::string_view str(const Value& v) const;            // String or Bytes
  const std::vector<Value>& items(const Value& v) const;  // List or Tuple
  const Dict& dict(const Value& v) const;
  // The value under string key `key` of a Dict, or nullptr.
  const Value* get(const Value& dict, std::string_view key) const;

 private:
  friend class Reader;
  Value root_;
  std::deque<std::string> strings_;
  std::deque<std::vector<Value>> lists_;
  std::deque<Dict> dicts_;
};

// Parses `data` (a whole pickle, protocol 0 to 5). Throws remat::Error "WHERE: ..." naming the
// offset for a refused or unknown opcode, truncated input, a malformed stack, or bytes after
// STOP; remat::LimitError for input past a limit.
Document parse(std::string_view data, const std::string& where);
// read_regular_file (limits::kPickleFileBytes) + parse.
Document read_file(const std::string& path);

}  // namespace remat::pickle
