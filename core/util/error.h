// Errors with context. Library code throws these; front ends print them.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace remat {

// A user-facing error: bad input, refused run, unreadable file.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A configuration field with a bad value; names the field and the value.
class ConfigError : public Error {
 public:
  ConfigError(std::string field, const std::string& message)
      : Error(field + ": " + message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// Several bad fields found at once (a Hugging Face import): field() and what() are those of a
// ConfigError naming the first and saying every problem; problems() lists each (field, message).
class ConfigProblems : public ConfigError {
 public:
  using List = std::vector<std::pair<std::string, std::string>>;
  ConfigProblems(List problems, const std::string& message)
      : ConfigError(problems.at(0).first, message), problems_(std::move(problems)) {}
  const List& problems() const { return problems_; }

 private:
  List problems_;
};

// The run needs more memory than is available or allowed.
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(const std::string& what, std::uint64_t needed, std::uint64_t available)
      : Error(what), needed_(needed), available_(available) {}
  std::uint64_t needed() const { return needed_; }
  std::uint64_t available() const { return available_; }

 private:
  std::uint64_t needed_;
  std::uint64_t available_;
};

// An illegal schedule: index of the first bad action and why.
class ScheduleError : public Error {
 public:
  ScheduleError(std::size_t index, const std::string& reason)
      : Error("schedule action " + std::to_string(index) + ": " + reason), index_(index) {}
  std::size_t index() const { return index_; }

 private:
  std::size_t index_;
};

// The run was cancelled by the user between ops.
class Cancelled : public Error {
 public:
  Cancelled() : Error("run cancelled") {}
};

// A message into a C caller's buffer of `len` bytes, cut to fit and NUL-terminated (the C entry
// points of the libraries opened with dlopen: nothing throws across them).
inline void put_error(char* buf, std::size_t len, const std::string& s) {
  if (!buf || len == 0) return;
  const std::size_t n = s.size() < len - 1 ? s.size() : len - 1;
  s.copy(buf, n);
  buf[n] = '\0';
}

}  // namespace remat
