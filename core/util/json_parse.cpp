// parse_json and parse_json_streaming (json_io.h): nlohmann's SAX parser driving a document
// builder of our own. Time and memory are linear in the text: every value is placed once, nothing
// is rescanned (nlohmann's callback parser looks through an object's parent for discarded values
// at each end of an object, quadratic in an array of objects), nesting is bounded before a level
// is opened, and the memory the document takes is counted as it grows.
#include <algorithm>
#include <cstdint>
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
                  const JsonElementFn* each, std::uint64_t budget, bool host)
      : where_(where), streamed_(streamed), each_(each), text_bytes_(text_bytes), budget_(budget), host_(host) {
    done_.assign(streamed_.size(), false);
    for (const auto& p : streamed_) max_path_ = std::max(max_path_, p.size());
  }

  json take() { return std::move(root_); }

  bool null() override { return scalar(json(nullptr)); }
  bool boolean(bool v) override { return scalar(json(v)); }
  bool number_integer(number_integer_t v) override { return scalar(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return scalar(json(v)); }
  bool string(string_t& v) override {
    const std::uint64_t heap = kHeapBlockBytes + (v.size() > kShortString ? v.size() : 0);
    return scalar(json(std::move(v)), heap);
  }
  bool binary(binary_t&) override { return scalar(json(nullptr)); }  // never in JSON text

  bool start_object(std::size_t) override { return open(json::value_t::object); }
  bool start_array(std::size_t) override {
    const int path = streamed_path();
    if (!open(json::value_t::array)) return false;
    levels_.back().streamed = path;
    return true;
  }
  bool key(string_t& k) override {
    charge(kMemberBytes + (k.size() > kShortString ? k.size() : 0));
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool end_array() override {
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
    if (levels_.size() >= static_cast<std::size_t>(limits::kJsonDepth))
      throw LimitError(where_ + ": JSON nested deeper than " + std::to_string(limits::kJsonDepth) + " levels");
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
    if (!each_) return -1;
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
  std::uint64_t text_bytes_, budget_ = 0, held_ = 0, slot_held_ = 0;
  bool host_;
  std::vector<bool> done_;
  std::size_t max_path_ = 0;
  std::vector<Level> levels_;
  std::string key_;
  json root_, slot_;
};

json parse(std::string_view text, const std::string& where, const std::vector<JsonPath>& streamed,
           const JsonElementFn* each, std::uint64_t budget, bool host) {
  if (text.size() > limits::kJsonFileBytes)
    throw LimitError(where + ": " + human(text.size()) + " of JSON is more than the " + human(limits::kJsonFileBytes) +
                     " a document may have");
  DocumentBuilder b(where, text.size(), streamed, each, budget, host);
  // strict: the document must be followed by nothing but white space.
  json::sax_parse(text.data(), text.data() + text.size(), &b, json::input_format_t::json, true);
  return b.take();
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

nlohmann::json read_json_file_streaming(const std::string& path, const std::vector<JsonPath>& streamed,
                                        const JsonElementFn& each) {
  return parse_json_streaming(read_regular_file(path, limits::kJsonFileBytes), path, streamed, each);
}

}  // namespace remat
