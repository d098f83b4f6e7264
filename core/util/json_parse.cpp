// parse_json and parse_json_streaming (json_io.h): nlohmann's SAX parser driving a document
// builder of our own. Time and memory are linear in the text: every value is placed once, nothing
// is rescanned (nlohmann's callback parser looks through an object's parent for discarded values
// at each end of an object, quadratic in an array of objects), nesting is bounded before a level
// is opened, and the memory the document takes is counted as it grows.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "core/util/error.h"
#include "core/util/host_memory.h"
#include "core/util/json_io.h"

namespace remat {

namespace {

using json = nlohmann::json;

// What a value costs in memory, roughly as libstdc++ and glibc lay it out: the value itself in its
// parent, a heap block per string, array and object, a tree node per object member.
constexpr std::uint64_t kValueBytes = sizeof(json);
constexpr std::uint64_t kHeapBlockBytes = 48;  // a std::string, vector or map object and malloc's header
constexpr std::uint64_t kMemberBytes = 64;     // a std::map node's links and malloc's header, with its key
constexpr std::uint64_t kShortString = 15;     // kept inside the std::string itself

// The memory a document may take: what the host has available now (no bound when unknown).
std::uint64_t host_budget() {
  const std::uint64_t avail = host_memory_available();
  return avail > 0 ? avail : ~std::uint64_t{0};
}

std::string human(std::uint64_t b) {
  if (b >= (std::uint64_t{1} << 30)) return std::to_string(b >> 30) + " GiB";
  if (b >= (std::uint64_t{1} << 20)) return std::to_string(b >> 20) + " MiB";
  return std::to_string(b) + " bytes";
}

class DocumentBuilder : public nlohmann::json_sax<json> {
 public:
  DocumentBuilder(const std::string& where, std::uint64_t text_bytes, const std::vector<JsonPath>& streamed,
                  const JsonElementFn* each, JsonElementSax* sink, std::uint64_t budget, bool host)
      : where_(where), streamed_(streamed), each_(each), sink_(sink), text_bytes_(text_bytes), budget_(budget),
        host_(host) {
    done_.assign(streamed_.size(), false);
    for (const auto& p : streamed_) max_path_ = std::max(max_path_, p.size());
  }

  json take() { return std::move(root_); }

  bool null() override {
    if (sinking()) return sunk_scalar([&] { sink_->null(); });
    return scalar(json(nullptr));
  }
  bool boolean(bool v) override {
    if (sinking()) return sunk_scalar([&] { sink_->boolean(v); });
    return scalar(json(v));
  }
  bool number_integer(number_integer_t v) override {
    if (sinking()) return sunk_scalar([&] { sink_->number_integer(v); });
    return scalar(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (sinking()) return sunk_scalar([&] { sink_->number_unsigned(v); });
    return scalar(json(v));
  }
  bool number_float(number_float_t v, const string_t& text) override {
    if (sinking()) return sunk_scalar([&] { sink_->number_float(v, text); });
    return scalar(json(v));
  }
  bool string(string_t& v) override {
    if (sinking()) return sunk_scalar([&] { sink_->string(v); });
    const std::uint64_t heap = kHeapBlockBytes + (v.size() > kShortString ? v.size() : 0);
    return scalar(json(std::move(v)), heap);
  }
  bool binary(binary_t&) override { return scalar(json(nullptr)); }  // never in JSON text

  bool start_object(std::size_t n) override {
    if (sinking()) return sunk_open([&] { sink_->start_object(n); });
    return open(json::value_t::object);
  }
  bool start_array(std::size_t n) override {
    if (sinking()) return sunk_open([&] { sink_->start_array(n); });
    const int path = streamed_path();
    if (!open(json::value_t::array)) return false;
    levels_.back().streamed = path;
    return true;
  }
  bool key(string_t& k) override {
    if (in_element_ > 0) return sink_->key(k), true;
    charge(kMemberBytes + (k.size() > kShortString ? k.size() : 0));
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (in_element_ > 0) return sunk_close([&] { sink_->end_object(); });
    return close();
  }
  bool end_array() override {
    if (in_element_ > 0) return sunk_close([&] { sink_->end_array(); });
    if (levels_.back().streamed >= 0) done_[static_cast<std::size_t>(levels_.back().streamed)] = true;
    return close();
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw Error(where_ + ": not valid JSON (truncated or corrupt): " + e.what());
  }

 private:
  struct Level {
    json* value;
    std::string key;      // the key this container sits under in its parent object ("" otherwise)
    int streamed = -1;    // an array of streamed_: the index of its path
    std::size_t count = 0;  // a streamed array's elements so far
  };

  void charge(std::uint64_t bytes) {
    held_ += bytes;
    if (held_ > budget_)
      throw LimitError(where_ + ": its values need more than the " + human(budget_) + " of memory " +
                       (host_ ? "available" : "this reader allows") + " (" + human(text_bytes_) +
                       " of JSON)");
  }

  // Where a new value goes: the root, the next element of an array (or the slot of a streamed
  // one), or the member under the last key of an object. `heap`: what it holds besides itself.
  json* place(json&& v, std::uint64_t heap) {
    Level* top = levels_.empty() ? nullptr : &levels_.back();
    if (top && top->streamed >= 0) slot_held_ = held_;  // let go with the element
    charge(kValueBytes + heap);
    if (!top) {
      root_ = std::move(v);
      return &root_;
    }
    if (top->value->is_array()) {
      if (top->streamed >= 0) {
        slot_ = std::move(v);
        return &slot_;
      }
      auto& a = top->value->get_ref<json::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    json& m = top->value->get_ref<json::object_t&>()[std::move(key_)];
    m = std::move(v);
    return &m;
  }

  // Whether a value goes to the sink: inside one of its elements, or starting one.
  bool sinking() const { return sink_ && (in_element_ > 0 || (!levels_.empty() && levels_.back().streamed >= 0)); }
  void begin_sunk() {
    Level& top = levels_.back();
    sink_->begin_element(static_cast<std::size_t>(top.streamed), top.count++);
  }
  template <class F>
  bool sunk_scalar(F&& f) {
    if (in_element_ == 0) begin_sunk();
    f();
    if (in_element_ == 0) sink_->end_element();
    return true;
  }
  template <class F>
  bool sunk_open(F&& f) {
    if (levels_.size() + in_element_ >= static_cast<std::size_t>(limits::kJsonDepth)) too_deep();
    if (in_element_ == 0) begin_sunk();
    ++in_element_;
    f();
    return true;
  }
  template <class F>
  bool sunk_close(F&& f) {
    f();
    if (--in_element_ == 0) sink_->end_element();
    return true;
  }
  [[noreturn]] void too_deep() const {
    throw LimitError(where_ + ": JSON nested deeper than " + std::to_string(limits::kJsonDepth) + " levels");
  }

  // A value complete in a streamed array goes to the handler and is let go.
  void complete_in_streamed(Level& parent) {
    (*each_)(static_cast<std::size_t>(parent.streamed), parent.count++, std::move(slot_));
    slot_ = json();
    held_ = slot_held_;
  }

  bool scalar(json&& v, std::uint64_t heap = 0) {
    place(std::move(v), heap);
    if (!levels_.empty() && levels_.back().streamed >= 0) complete_in_streamed(levels_.back());
    return true;
  }

  bool open(json::value_t kind) {
    if (levels_.size() >= static_cast<std::size_t>(limits::kJsonDepth)) too_deep();
    // Keys are kept only as deep as a streamed path reaches.
    std::string k = levels_.size() < max_path_ && !levels_.empty() && levels_.back().value->is_object()
                        ? key_ : std::string();
    json* v = place(json(kind), kHeapBlockBytes);
    levels_.push_back({v, std::move(k), -1, 0});
    return true;
  }

  bool close() {
    levels_.pop_back();
    if (!levels_.empty() && levels_.back().streamed >= 0) complete_in_streamed(levels_.back());
    return true;
  }

  // The index of the streamed path an array about to open sits at, or -1: every open level an
  // object, under the path's keys, the array under its last key.
  int streamed_path() const {
    if (!each_ && !sink_) return -1;
    for (std::size_t p = 0; p < streamed_.size(); ++p) {
      const JsonPath& path = streamed_[p];
      if (path.size() != levels_.size()) continue;
      bool match = true;
      for (std::size_t i = 0; i < levels_.size() && match; ++i) {
        match = levels_[i].value->is_object() &&
                (i + 1 < levels_.size() ? levels_[i + 1].key : key_) == path[i];
      }
      if (!match) continue;
      if (done_[p])
        throw Error(where_ + ": '" + (path.empty() ? std::string("the document") : path.back()) +
                    "' appears twice");
      return static_cast<int>(p);
    }
    return -1;
  }

  const std::string& where_;
  const std::vector<JsonPath>& streamed_;
  const JsonElementFn* each_;
  JsonElementSax* sink_;
  std::size_t in_element_ = 0;  // the levels open in the sink's element
  std::uint64_t text_bytes_, budget_ = 0, held_ = 0, slot_held_ = 0;
  bool host_;
  std::vector<bool> done_;
  std::size_t max_path_ = 0;
  std::vector<Level> levels_;
  std::string key_;
  json root_, slot_;
};

// The document of `bytes` bytes in [first, last): held text or a file as it is read.
template <class It>
json build(It first, It last, const std::string& where, std::uint64_t bytes, const std::vector<JsonPath>& streamed,
           const JsonElementFn* each, JsonElementSax* sink, std::uint64_t budget, bool host) {
  DocumentBuilder b(where, bytes, streamed, each, sink, budget, host);
  // strict: the document must be followed by nothing but white space.
  json::sax_parse(first, last, &b, json::input_format_t::json, true);
  return b.take();
}

json parse(std::string_view text, const std::string& where, const std::vector<JsonPath>& streamed,
           const JsonElementFn* each, std::uint64_t budget, bool host) {
  if (text.size() > limits::kJsonFileBytes)
    throw LimitError(where + ": " + human(text.size()) + " of JSON is more than the " + human(limits::kJsonFileBytes) +
                     " a document may have");
  return build(text.data(), text.data() + text.size(), where, text.size(), streamed, each, nullptr, budget, host);
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& where) {
  static const std::vector<JsonPath> none;
  return parse(text, where, none, nullptr, host_budget(), true);
}

nlohmann::json parse_json(std::string_view text, const std::string& where, std::uint64_t max_value_bytes) {
  static const std::vector<JsonPath> none;
  return parse(text, where, none, nullptr, max_value_bytes, false);
}

nlohmann::json parse_json_streaming(std::string_view text, const std::string& where,
                                    const std::vector<JsonPath>& streamed, const JsonElementFn& each) {
  return parse(text, where, streamed, &each, host_budget(), true);
}

namespace {

// An open file's bytes for the parser, read a megabyte at a time, so its text is never held whole
// (a profiler trace at the 1 GiB limit). Past `max_bytes` (a file that grew as it was read) is a
// LimitError; a read error an Error naming the file.
class FileBytes {
 public:
  FileBytes(int fd, const std::string& path, std::uint64_t max_bytes)
      : fd_(fd), path_(path), max_(max_bytes), buf_(std::size_t{1} << 20) {}
  ~FileBytes() { ::close(fd_); }
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;

  bool at_end() {
    if (pos_ == len_) fill();
    return pos_ == len_;
  }
  const char& get() const { return buf_[pos_]; }
  void next() { ++pos_; }

 private:
  void fill() {
    pos_ = len_ = 0;
    while (!eof_) {
      const ssize_t n = ::read(fd_, buf_.data(), buf_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(path_ + ": cannot be read (" + std::strerror(errno) + ")");
      if (n == 0) {
        eof_ = true;
        break;
      }
      total_ += static_cast<std::uint64_t>(n);
      if (total_ > max_)
        throw LimitError(path_ + ": more than the " + human(max_) + " this reader accepts");
      len_ = static_cast<std::size_t>(n);
      break;
    }
  }

  int fd_;
  const std::string& path_;
  std::uint64_t max_, total_ = 0;
  std::vector<char> buf_;
  std::size_t pos_ = 0, len_ = 0;
  bool eof_ = false;
};

// FileBytes as the input iterator nlohmann's parser reads from; the default one is the end.
class FileIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  FileIterator() = default;
  explicit FileIterator(FileBytes* f) : f_(f) {}
  const char& operator*() const { return f_->get(); }
  FileIterator& operator++() {
    f_->next();
    return *this;
  }
  FileIterator operator++(int) {
    FileIterator was = *this;
    f_->next();
    return was;
  }
  bool operator==(const FileIterator& o) const { return done() == o.done(); }

 private:
  bool done() const { return f_ == nullptr || f_->at_end(); }
  FileBytes* f_ = nullptr;
};

json stream_file(const std::string& path, const std::vector<JsonPath>& streamed, const JsonElementFn* each,
                 JsonElementSax* sink) {
  struct stat st {};
  FileBytes bytes(open_regular_file(path, st), path, limits::kJsonFileBytes);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  require_file_size_at_most(path, size, limits::kJsonFileBytes);
  return build(FileIterator(&bytes), FileIterator(), path, size, streamed, each, sink, host_budget(), true);
}

}  // namespace

nlohmann::json read_json_file_streaming(const std::string& path, const std::vector<JsonPath>& streamed,
                                        const JsonElementFn& each) {
  return stream_file(path, streamed, &each, nullptr);
}

nlohmann::json read_json_file_streaming(const std::string& path, const std::vector<JsonPath>& streamed,
                                        JsonElementSax& sink) {
  return stream_file(path, streamed, nullptr, &sink);
}

}  // namespace remat
