// What the profiler-trace import reads of one event, as plain values, from either a parsed JSON
// object or the parse events of one (the streamed import builds no JSON value per event). Both
// give the same fields for the same text: the last of a repeated key counts, a member of another
// type reads as absent.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/util/json_io.h"

namespace remat {

// The members of an event that are read.
enum class ProfilerEventMember : std::uint8_t { None, Ts, Dur, Ph, Name, Cat, Pid, Tid, Args };

struct ProfilerEvent {
  // The integer "args" read, in this order.
  enum Arg { ExternalId, Correlation, Flops, DeviceType, DeviceId, Addr, Bytes, TotalReserved, kArgs };
  enum class Cat : std::uint8_t { Absent, Text, Other };

  std::string not_object;  // what the event is when it is not an object ("" when it is one)
  std::optional<double> ts, dur;  // numbers only
  bool has_ph = false, has_name = false;  // strings only
  std::string ph, name;
  Cat cat_kind = Cat::Absent;
  std::string cat;  // when cat_kind is Text
  std::uint64_t pid = 0, tid = 0;  // integers, else 0
  std::optional<std::int64_t> args[kArgs];  // integers of an "args" object

  void clear();
};

// The event `e` (any JSON value).
ProfilerEvent profiler_event(const nlohmann::json& e);

// The events of streamed arrays, each handed on as it completes: called with the index of the
// streamed path, the event's index in its array and the event.
class ProfilerEventSax final : public JsonElementSax {
 public:
  using Fn = std::function<void(std::size_t path, std::size_t index, const ProfilerEvent& event)>;
  explicit ProfilerEventSax(Fn each) : each_(std::move(each)) {}

  void begin_element(std::size_t path, std::size_t index) override;
  void end_element() override;
  bool null() override { return other(); }
  bool boolean(bool v) override;
  bool number_integer(number_integer_t v) override;
  bool number_unsigned(number_unsigned_t v) override;
  bool number_float(number_float_t v, const string_t&) override;
  bool string(string_t& v) override;
  bool start_object(std::size_t) override;
  bool start_array(std::size_t) override;
  bool key(string_t& k) override;
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

 private:
  bool whole(const nlohmann::json& v);  // the element itself is a scalar
  bool other();  // a value of a type its member does not take
  bool number(double v, std::optional<std::int64_t> integer);
  bool close();

  Fn each_;
  std::size_t path_ = 0, index_ = 0;
  int depth_ = 0;     // open levels of the element
  bool in_args_ = false;  // the open level 2 is the event's "args" object
  ProfilerEventMember member_ = ProfilerEventMember::None;  // what a value at depth 1 sets
  int arg_ = -1;  // the args member a value at depth 2 sets, or -1
  ProfilerEvent ev_;
};

}  // namespace remat
