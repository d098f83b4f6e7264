// The opcode machine of the restricted pickle reader (pickle_reader.h): a stack, a stack of
// MARKs and a memo, over data opcodes only.
#include "core/io/pickle_reader.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "core/util/error.h"
#include "core/util/json_io.h"
#include "core/util/limits.h"

namespace remat::pickle {

const char* to_string(Kind k) {
  static const char* n[] = {"None", "bool", "int", "float", "str", "bytes", "list", "tuple", "dict"};
  return n[static_cast<int>(k)];
}

std::string_view Document::str(const Value& v) const {
  if (v.kind != Kind::String && v.kind != Kind::Bytes) throw Error(std::string("not a string but ") + to_string(v.kind));
  return strings_[v.index];
}
const std::vector<Value>& Document::items(const Value& v) const {
  if (v.kind != Kind::List && v.kind != Kind::Tuple) throw Error(std::string("not a list but ") + to_string(v.kind));
  return lists_[v.index];
}
const Dict& Document::dict(const Value& v) const {
  if (v.kind != Kind::Dict) throw Error(std::string("not a dict but ") + to_string(v.kind));
  return dicts_[v.index];
}
const Value* Document::get(const Value& d, std::string_view key) const {
  const Value* found = nullptr;  // the last one set wins, as in Python
  for (const auto& [k, v] : dict(d).items)
    if (k.kind == Kind::String && strings_[k.index] == key) found = &v;
  return found;
}

namespace {

// Opcodes that import a name, call something or reach outside the stream.
const char* code_opcode(unsigned char op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

std::string hex_byte(unsigned char c) {
  static const char* d = "0123456789abcdef";
  return std::string("0x") + d[c >> 4] + d[c & 15];
}

}  // namespace

class Reader {
 public:
  Reader(std::string_view data, const std::string& where)
      : in_(data), where_(where),
        max_expansion_(limits::kPickleExpansionPerByte * static_cast<std::uint64_t>(data.size()) +
                       limits::kPickleExpansionFloor) {}

  Document run() {
    while (true) {
      if (pos_ >= in_.size())
        fail_at(pos_, "ends without STOP (truncated?)");
      op_at_ = pos_;
      const auto op = static_cast<unsigned char>(in_[pos_++]);
      if (op == '.') break;
      step(op);
    }
    if (stack_.size() != 1 || !marks_.empty())
      fail_at(op_at_, "STOP with " + std::to_string(stack_.size()) + " values on the stack (expected one)");
    if (pos_ != in_.size())
      fail_at(pos_, std::to_string(in_.size() - pos_) + " bytes after STOP");
    doc_.root_ = stack_.back();
    return std::move(doc_);
  }

 private:
  [[noreturn]] void fail_at(std::size_t at, const std::string& why) const {
    throw Error(where_ + ": pickle offset " + std::to_string(at) + ": " + why);
  }
  [[noreturn]] void fail(const std::string& why) const { fail_at(op_at_, why); }
  [[noreturn]] void limit(const std::string& why) const {
    throw LimitError(where_ + ": pickle offset " + std::to_string(op_at_) + ": " + why);
  }

  // ---------------------------------------------------------------- input
  std::string_view take(std::uint64_t n, const char* what) {
    if (n > in_.size() - pos_)
      fail("truncated: " + std::string(what) + " needs " + std::to_string(n) + " bytes, " +
           std::to_string(in_.size() - pos_) + " left");
    auto s = in_.substr(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  std::uint64_t le(int n, const char* what) {
    auto s = take(static_cast<std::uint64_t>(n), what);
    std::uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(s[static_cast<std::size_t>(k)]);
    return v;
  }
  std::string_view line(const char* what) {
    auto nl = in_.find('\n', pos_);
    if (nl == std::string_view::npos) fail(std::string("truncated: ") + what + " has no end of line");
    auto s = in_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return s;
  }
  std::int64_t decimal(std::string_view s, const char* what) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size())
      fail(std::string(what) + " '" + std::string(s.substr(0, 40)) + "' is not a 64-bit integer");
    return v;
  }

  // ---------------------------------------------------------------- values
  // Every value the pickle builds comes through here (not those a GET or DUP repeats).
  Value scalar(Kind k) {
    ++built_;
    Value v;
    v.kind = k;
    return v;
  }
  Value integer(std::int64_t i) {
    Value v = scalar(Kind::Int);
    v.i = i;
    return v;
  }
  Value string(Kind k, std::string_view s) {
    if (s.size() > limits::kPickleStringBytes)
      limit("a string of " + std::to_string(s.size()) + " bytes is longer than the " +
            std::to_string(limits::kPickleStringBytes) + " a pickle string may have");
    Value v = scalar(k);
    v.index = next_index(doc_.strings_.size());
    doc_.strings_.emplace_back(s);
    return v;
  }
  Value sized_string(Kind k, std::uint64_t n, const char* what) {
    if (n > limits::kPickleStringBytes)
      limit(std::string(what) + " of " + std::to_string(n) + " bytes is longer than the " +
            std::to_string(limits::kPickleStringBytes) + " a pickle string may have");
    return string(k, take(n, what));
  }
  std::uint32_t next_index(std::size_t n) {
    if (n >= 0xffffffffu) limit("more than 2^32 strings, lists or dicts of one kind");
    return static_cast<std::uint32_t>(n);
  }
  Value container(Kind k, std::vector<Value> items = {}) {
    Value v = scalar(k);
    v.index = next_index(doc_.lists_.size());
    doc_.lists_.push_back(std::move(items));
    sealed_lists_.push_back(false);
    depth_lists_.push_back(0);
    expansion_lists_.push_back(1);
    for (const auto& x : doc_.lists_.back()) adopt(v, x);
    return v;
  }
  Value new_dict() {
    Value v = scalar(Kind::Dict);
    v.index = next_index(doc_.dicts_.size());
    doc_.dicts_.emplace_back();
    sealed_dicts_.push_back(false);
    depth_dicts_.push_back(0);
    expansion_dicts_.push_back(1);
    return v;
  }
  static bool is_container(const Value& v) { return v.kind == Kind::List || v.kind == Kind::Tuple || v.kind == Kind::Dict; }
  int& depth_of(const Value& v) { return v.kind == Kind::Dict ? depth_dicts_[v.index] : depth_lists_[v.index]; }
  std::uint64_t& expansion_of(const Value& v) {
    return v.kind == Kind::Dict ? expansion_dicts_[v.index] : expansion_lists_[v.index];
  }
  std::vector<bool>::reference sealed(const Value& v) {
    return v.kind == Kind::Dict ? sealed_dicts_[v.index] : sealed_lists_[v.index];
  }
  // `child` goes inside `parent`: it may not change from now on, and it bounds the depth and the
  // expansion: the values a walk of the parent visits, a shared (memo GET) container once per
  // place it appears. That is what a reader of the document does, so sharing is bounded by the
  // file's size, not only by the depth (a 12 KB DAG expanded past 3 GB).
  void adopt(const Value& parent, const Value& child) {
    std::uint64_t& e = expansion_of(parent);
    e += is_container(child) ? expansion_of(child) : 1;
    if (e > max_expansion_)
      limit("lists, tuples or dicts shared through the memo expand to more than " + std::to_string(max_expansion_) +
            " values (" + std::to_string(limits::kPickleExpansionPerByte) + " per byte of the pickle's " +
            std::to_string(in_.size()) + " bytes, and " + std::to_string(limits::kPickleExpansionFloor) +
            "): a document this reader refuses");
    if (!is_container(child)) return;
    if (child.kind == parent.kind && child.index == parent.index)
      fail(std::string("puts a ") + to_string(child.kind) + " inside itself (a self-referencing structure)");
    sealed(child) = true;
    int& d = depth_of(parent);
    d = std::max(d, depth_of(child) + 1);
    if (d >= limits::kPickleDepth)
      limit("nested deeper than " + std::to_string(limits::kPickleDepth) + " levels");
  }
  // The list or dict an APPEND or SETITEM changes.
  Value& target(Kind want, const char* opname) {
    if (stack_.empty() || stack_.size() <= base()) fail(std::string(opname) + " with nothing to change on the stack");
    Value& t = stack_.back();
    if (t.kind != want)
      fail(std::string(opname) + " on a " + to_string(t.kind) + ", not a " + to_string(want));
    if (sealed(t)) fail(std::string(opname) + " changes a " + to_string(want) + " already placed in another (a self-referencing structure)");
    return t;
  }

  // ---------------------------------------------------------------- stack
  std::size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Value v) { stack_.push_back(v); }
  Value pop(const char* opname) {
    if (stack_.size() <= base()) fail(std::string(opname) + " needs a value, the stack is empty" + (marks_.empty() ? "" : " above the MARK"));
    Value v = stack_.back();
    stack_.pop_back();
    return v;
  }
  // The values above the last MARK, which is removed.
  std::vector<Value> pop_mark(const char* opname) {
    if (marks_.empty()) fail(std::string(opname) + " without a MARK");
    std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Value> v(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return v;
  }

  // ---------------------------------------------------------------- memo
  // One array, indexed by entry. A pickler numbers its entries in the order it memoizes values,
  // each value once (an optimized pickle may skip numbers), so an entry's number is below the
  // count of values built so far: the memo never holds more entries than the pickle built values,
  // 16 bytes each, and a PUT numbered past that is refused.
  void memo_put(std::uint64_t idx) {
    if (stack_.size() <= base()) fail("memo PUT with an empty stack");
    if (idx >= built_)
      fail("memo PUT of entry " + std::to_string(idx) + " when only " + std::to_string(built_) +
           " values were built (a pickler numbers entries in order, one per value)");
    if (idx >= limits::kPickleMemoEntries)
      limit("more than " + std::to_string(limits::kPickleMemoEntries) + " memo entries");
    if (idx >= memo_.size()) {
      memo_.resize(static_cast<std::size_t>(idx) + 1);
      memo_set_.resize(static_cast<std::size_t>(idx) + 1, false);
    }
    memo_[static_cast<std::size_t>(idx)] = stack_.back();
    if (!memo_set_[static_cast<std::size_t>(idx)]) ++memo_entries_;
    memo_set_[static_cast<std::size_t>(idx)] = true;
  }
  void memo_get(std::uint64_t idx) {
    if (idx >= memo_.size() || !memo_set_[static_cast<std::size_t>(idx)])
      fail("memo GET of entry " + std::to_string(idx) + ", which was never PUT");
    push(memo_[static_cast<std::size_t>(idx)]);
  }

  // ---------------------------------------------------------------- text opcodes
  static void put_utf8(std::string& o, std::uint32_t c) {
    if (c < 0x80) o += static_cast<char>(c);
    else if (c < 0x800) { o += static_cast<char>(0xc0 | (c >> 6)); o += static_cast<char>(0x80 | (c & 0x3f)); }
    else if (c < 0x10000) { o += static_cast<char>(0xe0 | (c >> 12)); o += static_cast<char>(0x80 | ((c >> 6) & 0x3f)); o += static_cast<char>(0x80 | (c & 0x3f)); }
    else { o += static_cast<char>(0xf0 | (c >> 18)); o += static_cast<char>(0x80 | ((c >> 12) & 0x3f)); o += static_cast<char>(0x80 | ((c >> 6) & 0x3f)); o += static_cast<char>(0x80 | (c & 0x3f)); }
  }
  std::uint32_t hex(std::string_view s, std::size_t& k, int n, const char* what) {
    if (k + static_cast<std::size_t>(n) > s.size()) fail(std::string(what) + ": a cut escape");
    std::uint32_t c = 0;
    auto [p, ec] = std::from_chars(s.data() + k, s.data() + k + n, c, 16);
    if (ec != std::errc() || p != s.data() + k + n) fail(std::string(what) + ": a bad hex escape");
    k += static_cast<std::size_t>(n);
    return c;
  }
  // STRING: a quoted Python 2 literal with backslash escapes.
  std::string quoted(std::string_view s) {
    if (s.size() < 2 || (s.front() != '\'' && s.front() != '"') || s.back() != s.front())
      fail("STRING argument is not quoted");
    s = s.substr(1, s.size() - 2);
    std::string o;
    for (std::size_t k = 0; k < s.size();) {
      char c = s[k++];
      if (c != '\\') { o += c; continue; }
      if (k >= s.size()) fail("STRING: a cut escape");
      char e = s[k++];
      switch (e) {
        case 'n': o += '\n'; break;
        case 't': o += '\t'; break;
        case 'r': o += '\r'; break;
        case '0': o += '\0'; break;
        case 'x': o += static_cast<char>(hex(s, k, 2, "STRING")); break;
        default: o += e;
      }
    }
    return o;
  }
  // UNICODE: raw-unicode-escape (only \uXXXX and \UXXXXXXXX are escapes; bytes are Latin-1).
  std::string raw_unicode(std::string_view s) {
    std::string o;
    for (std::size_t k = 0; k < s.size();) {
      if (s[k] == '\\' && k + 1 < s.size() && (s[k + 1] == 'u' || s[k + 1] == 'U')) {
        int n = s[k + 1] == 'u' ? 4 : 8;
        k += 2;
        std::uint32_t c = hex(s, k, n, "UNICODE");
        if (c > 0x10ffff) fail("UNICODE: escape past U+10FFFF");
        put_utf8(o, c);
      } else {
        put_utf8(o, static_cast<unsigned char>(s[k++]));
      }
    }
    return o;
  }
  // LONG1 / LONG4: little-endian two's complement of n bytes.
  Value long_bytes(std::uint64_t n, const char* what) {
    if (n > 8) fail(std::string(what) + ": an integer of " + std::to_string(n) + " bytes is beyond 64 bits");
    if (n == 0) return integer(0);
    std::uint64_t v = le(static_cast<int>(n), what);
    if (n < 8 && (v >> (8 * n - 1)) & 1) v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
    return integer(static_cast<std::int64_t>(v));
  }

  void step(unsigned char op) {
    if (const char* name = code_opcode(op))
      fail("opcode " + std::string(name) + " (" + hex_byte(op) +
           ") would import or call code; refused (only plain data is read)");
    switch (op) {
      case 0x80: {  // PROTO
        auto v = le(1, "PROTO");
        if (v > 5) fail("pickle protocol " + std::to_string(v) + " is newer than this reader knows (0 to 5)");
        return;
      }
      case 0x95: le(8, "FRAME"); return;  // frames only group opcodes for buffered reading
      case '(':
        if (marks_.size() >= static_cast<std::size_t>(limits::kPickleDepth))
          limit("more than " + std::to_string(limits::kPickleDepth) + " MARKs open at once");
        marks_.push_back(stack_.size());
        return;
      case '0': pop("POP"); return;
      case '1': pop_mark("POP_MARK"); return;
      case '2': { Value v = pop("DUP"); push(v); push(v); return; }
      case 'N': return push(scalar(Kind::None));
      case 0x88: case 0x89: { Value v = scalar(Kind::Bool); v.b = op == 0x88; return push(v); }
      case 'I': {
        auto s = line("INT");
        if (s == "00" || s == "01") { Value v = scalar(Kind::Bool); v.b = s == "01"; return push(v); }
        return push(integer(decimal(s, "INT")));
      }
      case 'L': {
        auto s = line("LONG");
        if (!s.empty() && s.back() == 'L') s.remove_suffix(1);
        return push(integer(decimal(s, "LONG")));
      }
      case 'J': return push(integer(static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4, "BININT")))));
      case 'K': return push(integer(static_cast<std::int64_t>(le(1, "BININT1"))));
      case 'M': return push(integer(static_cast<std::int64_t>(le(2, "BININT2"))));
      case 0x8a: return push(long_bytes(le(1, "LONG1"), "LONG1"));
      case 0x8b: return push(long_bytes(le(4, "LONG4"), "LONG4"));
      case 'F': {
        auto s = line("FLOAT");
        Value v = scalar(Kind::Float);
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v.f);
        if (ec != std::errc() || p != s.data() + s.size()) fail("FLOAT '" + std::string(s.substr(0, 40)) + "' is not a number");
        return push(v);
      }
      case 'G': {
        auto s = take(8, "BINFLOAT");
        std::uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<unsigned char>(s[static_cast<std::size_t>(k)]);
        Value v = scalar(Kind::Float);
        std::memcpy(&v.f, &bits, 8);
        return push(v);
      }
      case 'S': return push(string(Kind::String, quoted(line("STRING"))));
      case 'V': return push(string(Kind::String, raw_unicode(line("UNICODE"))));
      case 'T': return push(sized_string(Kind::String, le(4, "BINSTRING"), "BINSTRING"));
      case 'U': return push(sized_string(Kind::String, le(1, "SHORT_BINSTRING"), "SHORT_BINSTRING"));
      case 'X': return push(sized_string(Kind::String, le(4, "BINUNICODE"), "BINUNICODE"));
      case 0x8c: return push(sized_string(Kind::String, le(1, "SHORT_BINUNICODE"), "SHORT_BINUNICODE"));
      case 0x8d: return push(sized_string(Kind::String, le(8, "BINUNICODE8"), "BINUNICODE8"));
      case 'B': return push(sized_string(Kind::Bytes, le(4, "BINBYTES"), "BINBYTES"));
      case 'C': return push(sized_string(Kind::Bytes, le(1, "SHORT_BINBYTES"), "SHORT_BINBYTES"));
      case 0x8e: return push(sized_string(Kind::Bytes, le(8, "BINBYTES8"), "BINBYTES8"));
      case 0x96: return push(sized_string(Kind::Bytes, le(8, "BYTEARRAY8"), "BYTEARRAY8"));
      case ']': return push(container(Kind::List));
      case ')': return push(container(Kind::Tuple));
      case '}': return push(new_dict());
      case 'l': return push(container(Kind::List, pop_mark("LIST")));
      case 't': return push(container(Kind::Tuple, pop_mark("TUPLE")));
      case 0x85: case 0x86: case 0x87: {
        std::vector<Value> v(static_cast<std::size_t>(op - 0x84));
        for (auto it = v.rbegin(); it != v.rend(); ++it) *it = pop(op == 0x85 ? "TUPLE1" : op == 0x86 ? "TUPLE2" : "TUPLE3");
        return push(container(Kind::Tuple, std::move(v)));
      }
      case 'd': {
        auto v = pop_mark("DICT");
        if (v.size() % 2) fail("DICT with an odd number of values");
        Value d = new_dict();
        push(d);
        set_items(std::move(v), "DICT");
        return;
      }
      case 'a': {
        Value x = pop("APPEND");
        Value& t = target(Kind::List, "APPEND");
        adopt(t, x);
        doc_.lists_[t.index].push_back(x);
        return;
      }
      case 'e': {
        auto v = pop_mark("APPENDS");
        Value& t = target(Kind::List, "APPENDS");
        for (const auto& x : v) adopt(t, x);
        auto& l = doc_.lists_[t.index];
        l.insert(l.end(), v.begin(), v.end());
        return;
      }
      case 's': {
        Value val = pop("SETITEM");
        Value key = pop("SETITEM");
        set_items({key, val}, "SETITEM");
        return;
      }
      case 'u': return set_items(pop_mark("SETITEMS"), "SETITEMS");
      case 0x94: return memo_put(memo_entries_);  // MEMOIZE: the next entry, as len(memo)
      case 'p': return memo_put(static_cast<std::uint64_t>(std::max<std::int64_t>(0, decimal(line("PUT"), "PUT"))));
      case 'q': return memo_put(le(1, "BINPUT"));
      case 'r': return memo_put(le(4, "LONG_BINPUT"));
      case 'g': {
        auto i = decimal(line("GET"), "GET");
        if (i < 0) fail("memo GET of a negative entry");
        return memo_get(static_cast<std::uint64_t>(i));
      }
      case 'h': return memo_get(le(1, "BINGET"));
      case 'j': return memo_get(le(4, "LONG_BINGET"));
      case 0x8f: case 0x90: case 0x91:
        fail("opcode " + std::string(op == 0x8f ? "EMPTY_SET" : op == 0x90 ? "ADDITEMS" : "FROZENSET") + " (" +
             hex_byte(op) + "): sets are not read");
      default:
        fail("unknown opcode " + hex_byte(op));
    }
  }

  // Key, value pairs into the dict on top of the stack. A key must be a scalar or a string
  // (what Python can hash among the values read here, tuples aside).
  void set_items(std::vector<Value> kv, const char* opname) {
    if (kv.size() % 2) fail(std::string(opname) + " with an odd number of values");
    Value& t = target(Kind::Dict, opname);
    auto& items = doc_.dicts_[t.index].items;
    for (std::size_t k = 0; k < kv.size(); k += 2) {
      if (kv[k].kind == Kind::List || kv[k].kind == Kind::Dict)
        fail(std::string(opname) + ": a " + to_string(kv[k].kind) + " as a dict key");
      adopt(t, kv[k]);
      adopt(t, kv[k + 1]);
      items.emplace_back(kv[k], kv[k + 1]);
    }
  }

  std::string_view in_;
  const std::string& where_;
  std::size_t pos_ = 0, op_at_ = 0;
  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;
  std::vector<Value> memo_;
  std::vector<bool> memo_set_;
  std::uint64_t memo_entries_ = 0;  // set entries (the array may have gaps)
  std::uint64_t built_ = 0;  // values built (not repeated by GET or DUP)
  std::vector<bool> sealed_lists_, sealed_dicts_;
  std::vector<int> depth_lists_, depth_dicts_;
  std::vector<std::uint64_t> expansion_lists_, expansion_dicts_;
  const std::uint64_t max_expansion_;
  Document doc_;
};

Document parse(std::string_view data, const std::string& where) { return Reader(data, where).run(); }

Document read_file(const std::string& path) {
  const std::string data = read_regular_file(path, limits::kPickleFileBytes);
  return parse(data, path);
}

}  // namespace remat::pickle
