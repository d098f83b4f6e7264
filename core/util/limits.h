// What a reader accepts, in one place. Every bound is far above any real model (a 1T-parameter
// model at a 1M-token sequence still plans) and past it a reader throws LimitError naming the
// limit, the value and the file or field.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "core/util/error.h"

namespace remat {

namespace limits {
// JSON documents (model files, Hugging Face configs, schedules, summary.json, sweep.json,
// safetensors headers): nesting depth and file size.
inline constexpr int kJsonDepth = 64;
inline constexpr std::uint64_t kJsonFileBytes = std::uint64_t{1} << 30;  // 1 GiB
// Any other input file read whole (CSV tables of a run directory, the corpus).
inline constexpr std::uint64_t kTableFileBytes = std::uint64_t{16} << 30;  // 16 GiB
// A model: transformer blocks (the largest published models have a few hundred).
inline constexpr long long kLayers = 100'000;
// A schedule: actions (a policy emits a few per block; Revolve up to ~L log L).
inline constexpr long long kScheduleActions = 10'000'000;
// Rows of one run-directory table.
inline constexpr std::uint64_t kTableRows = std::uint64_t{1} << 32;
// Times on a run's clock (nanoseconds since it started): about 31 years. Differences and sums
// of two such times cannot overflow.
inline constexpr std::int64_t kClockNs = 1'000'000'000'000'000'000;
// Bytes of memory: one allocation, and the live bytes of a category or a space at any point
// (64 PiB). Running sums of events this size cannot overflow.
inline constexpr std::int64_t kMemoryBytes = std::int64_t{1} << 56;
// Python pickles (a torch memory snapshot): file size, nesting depth of lists, tuples and dicts
// (and of MARKs open at once), memo entries (besides: no more than the values built), and one
// string's bytes.
inline constexpr std::uint64_t kPickleFileBytes = std::uint64_t{16} << 30;  // 16 GiB
inline constexpr int kPickleDepth = 64;
inline constexpr std::uint64_t kPickleMemoEntries = std::uint64_t{1} << 28;
inline constexpr std::uint64_t kPickleStringBytes = std::uint64_t{64} << 20;  // 64 MiB
// The values a walk of a pickle's document visits, shared containers counted where each appears:
// at most this many per byte of the file, plus the floor (real snapshots: about 5 per byte).
inline constexpr std::uint64_t kPickleExpansionPerByte = 64;
inline constexpr std::uint64_t kPickleExpansionFloor = std::uint64_t{1} << 16;
}  // namespace limits

// An input past one of the limits above.
class LimitError : public Error {
 public:
  explicit LimitError(const std::string& what) : Error(what) {}
};

// `v` as a T, or a ConfigError naming `field` when it does not fit (no silent truncation).
template <class T>
T checked_narrow(long long v, const std::string& field) {
  if (!std::in_range<T>(v)) throw ConfigError(field, "is out of range: " + std::to_string(v));
  return static_cast<T>(v);
}

}  // namespace remat
