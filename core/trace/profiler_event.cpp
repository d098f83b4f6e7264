// ProfilerEvent from a parsed object and from the parse events of one, member by member with the
// same rules: a number for "ts" and "dur", a string for "ph", "name" and "cat", an integer for
// "pid", "tid" and each of the args; anything else reads as absent.
#include "core/trace/profiler_event.h"

#include <string_view>

namespace remat {

namespace {

using Member = ProfilerEventMember;

Member member_named(std::string_view k) {
  switch (k.size()) {
    case 2:
      return k == "ts" ? Member::Ts : k == "ph" ? Member::Ph : Member::None;
    case 3:
      return k == "cat" ? Member::Cat : k == "dur" ? Member::Dur : k == "pid" ? Member::Pid
                                                                : k == "tid" ? Member::Tid : Member::None;
    case 4:
      return k == "name" ? Member::Name : k == "args" ? Member::Args : Member::None;
    default:
      return Member::None;
  }
}

int arg_named(std::string_view k) {
  static constexpr std::string_view kNames[ProfilerEvent::kArgs] = {
      "External id", "correlation", "flops", "Device Type", "Device Id", "Addr", "Bytes", "Total Reserved"};
  for (int a = 0; a < ProfilerEvent::kArgs; ++a)
    if (k == kNames[a]) return a;
  return -1;
}

void clear_args(ProfilerEvent& ev) {
  for (auto& a : ev.args) a.reset();
}

std::optional<std::int64_t> integer_of(const nlohmann::json& v) {
  if (!v.is_number_integer()) return std::nullopt;
  return v.get<std::int64_t>();
}

// The member `m` of `ev` set from `v`.
void set(ProfilerEvent& ev, Member m, const nlohmann::json& v) {
  const std::optional<double> number = v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt;
  const std::string* text = v.is_string() ? &v.get_ref<const std::string&>() : nullptr;
  switch (m) {
    case Member::Ts: ev.ts = number; break;
    case Member::Dur: ev.dur = number; break;
    case Member::Ph: ev.has_ph = text != nullptr, ev.ph = text ? *text : std::string(); break;
    case Member::Name: ev.has_name = text != nullptr, ev.name = text ? *text : std::string(); break;
    case Member::Cat:
      ev.cat_kind = text ? ProfilerEvent::Cat::Text : ProfilerEvent::Cat::Other;
      ev.cat = text ? *text : std::string();
      break;
    case Member::Pid: ev.pid = static_cast<std::uint64_t>(integer_of(v).value_or(0)); break;
    case Member::Tid: ev.tid = static_cast<std::uint64_t>(integer_of(v).value_or(0)); break;
    case Member::Args:
      clear_args(ev);
      if (v.is_object())
        for (auto it = v.begin(); it != v.end(); ++it)
          if (const int a = arg_named(it.key()); a >= 0) ev.args[a] = integer_of(*it);
      break;
    case Member::None: break;
  }
}

}  // namespace

void ProfilerEvent::clear() {
  not_object.clear();
  ts.reset(), dur.reset();
  has_ph = has_name = false;
  ph.clear(), name.clear();
  cat_kind = Cat::Absent;
  cat.clear();
  pid = tid = 0;
  clear_args(*this);
}

ProfilerEvent profiler_event(const nlohmann::json& e) {
  ProfilerEvent ev;
  if (!e.is_object()) {
    ev.not_object = e.is_array() ? "an array" : json_snippet(e);
    return ev;
  }
  for (auto it = e.begin(); it != e.end(); ++it) set(ev, member_named(it.key()), *it);
  return ev;
}

void ProfilerEventSax::begin_element(std::size_t path, std::size_t index) {
  path_ = path, index_ = index;
  depth_ = 0, in_args_ = false;
  member_ = Member::None, arg_ = -1;
  ev_.clear();
}

void ProfilerEventSax::end_element() { each_(path_, index_, ev_); }

bool ProfilerEventSax::whole(const nlohmann::json& v) {
  ev_.not_object = json_snippet(v);
  return true;
}

bool ProfilerEventSax::other() {
  if (depth_ == 0) return whole(nullptr);  // null is the one scalar that comes here at depth 0
  if (depth_ == 1) {
    switch (member_) {
      case Member::Ts: ev_.ts.reset(); break;
      case Member::Dur: ev_.dur.reset(); break;
      case Member::Ph: ev_.has_ph = false, ev_.ph.clear(); break;
      case Member::Name: ev_.has_name = false, ev_.name.clear(); break;
      case Member::Cat: ev_.cat_kind = ProfilerEvent::Cat::Other, ev_.cat.clear(); break;
      case Member::Pid: ev_.pid = 0; break;
      case Member::Tid: ev_.tid = 0; break;
      case Member::Args: clear_args(ev_); break;
      case Member::None: break;
    }
  } else if (depth_ == 2 && in_args_ && arg_ >= 0) {
    ev_.args[arg_].reset();
  }
  return true;
}

bool ProfilerEventSax::boolean(bool v) {
  if (depth_ == 0) return whole(v);
  return other();
}

bool ProfilerEventSax::number(double v, std::optional<std::int64_t> integer) {
  if (depth_ == 1) {
    switch (member_) {
      case Member::Ts: ev_.ts = v; return true;
      case Member::Dur: ev_.dur = v; return true;
      case Member::Pid: ev_.pid = static_cast<std::uint64_t>(integer.value_or(0)); return true;
      case Member::Tid: ev_.tid = static_cast<std::uint64_t>(integer.value_or(0)); return true;
      default: return other();
    }
  }
  if (depth_ == 2 && in_args_ && arg_ >= 0) ev_.args[arg_] = integer;
  return true;
}

bool ProfilerEventSax::number_integer(number_integer_t v) {
  if (depth_ == 0) return whole(v);
  return number(static_cast<double>(v), v);
}

bool ProfilerEventSax::number_unsigned(number_unsigned_t v) {
  if (depth_ == 0) return whole(v);
  return number(static_cast<double>(v), static_cast<std::int64_t>(v));
}

bool ProfilerEventSax::number_float(number_float_t v, const string_t&) {
  if (depth_ == 0) return whole(v);
  return number(v, std::nullopt);
}

bool ProfilerEventSax::string(string_t& v) {
  if (depth_ == 0) return whole(v);
  if (depth_ == 1) {
    switch (member_) {
      case Member::Ph: ev_.has_ph = true, ev_.ph = v; return true;
      case Member::Name: ev_.has_name = true, ev_.name = v; return true;
      case Member::Cat: ev_.cat_kind = ProfilerEvent::Cat::Text, ev_.cat = v; return true;
      default: return other();
    }
  }
  return other();
}

bool ProfilerEventSax::start_object(std::size_t) {
  if (depth_ == 1 && member_ == Member::Args) {
    clear_args(ev_);
    in_args_ = true;
  } else if (depth_ > 0) {
    other();
  }
  ++depth_;
  return true;
}

bool ProfilerEventSax::start_array(std::size_t) {
  if (depth_ == 0) ev_.not_object = "an array";
  else other();
  ++depth_;
  return true;
}

bool ProfilerEventSax::key(string_t& k) {
  if (depth_ == 1) member_ = member_named(k);
  else if (depth_ == 2 && in_args_) arg_ = arg_named(k);
  return true;
}

bool ProfilerEventSax::close() {
  if (--depth_ == 1) in_args_ = false;
  return true;
}

}  // namespace remat
