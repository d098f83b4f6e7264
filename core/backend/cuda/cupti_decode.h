// The record decoder: CUPTI activity records (CONCURRENT_KERNEL, MEMCPY, MEMSET, MEMORY2,
// EXTERNAL_CORRELATION; RUNTIME and DRIVER API records are counted and skipped) become
// remat::OpRecord rows. Each kernel, copy and memset carries the correlation id of the API call
// that issued it; the EXTERNAL_CORRELATION record of that call carries the executor's op id
// (pushed as CUSTOM0 around every op), which gives the op's name, block, phase and step.
// Records may arrive in any order and across buffers; resolution happens in take().
//
// Record mode files (see CuptiProfiler): buffer_NNN.bin holds a completed buffer's valid bytes
// as CUPTI wrote them; buffer_NNN.idx holds each record's offset, kind and name (the names in
// the binary are pointers into the recording process) and the clock offset; ops.tsv holds the
// executor's ops. read_recorded_buffer / decode_recorded_dir turn such a directory back into
// records; without an .idx the buffer is walked with this CUPTI version's record sizes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include <cupti_activity.h>

#include "core/profiler/profiler.h"
#include "core/trace/records.h"

namespace remat::cupti {

using OpTable = std::unordered_map<std::uint64_t, OpInfo>;

// Size of a record of `kind` as this CUPTI version writes it; 0 for kinds we do not decode.
std::size_t record_size(std::uint32_t kind);

// Walks a buffer record by record with record_size; false (and *error) when an unknown kind or
// a truncated record stops the walk.
bool walk_buffer(const std::uint8_t* buf, std::size_t valid,
                 const std::function<void(const CUpti_Activity*, std::size_t offset)>& fn,
                 std::string* error);

// "void ns::(anonymous namespace)::k<8>(int*)" -> "ns::k<8>"; unmangled names pass through.
std::string kernel_display_name(const char* name);

struct DecodeStats {
  std::uint64_t kernels = 0, memcpys = 0, memsets = 0, memory = 0, external = 0, api = 0,
                other = 0, unattributed = 0;
};

class ActivityDecoder {
 public:
  // One record; `name` replaces the record's own name pointer when given (records read back
  // from files); offset_ns moves its CUPTI timestamps onto the run's clock.
  void add(const CUpti_Activity* rec, std::int64_t offset_ns, const char* name = nullptr);
  // Everything added since the last take, attributed through `ops`, sorted by time. Each op's
  // flops and bytes go on its first kernel (memcpys carry their own byte counts), so sums over
  // records are right. Correlations seen in the previous take still resolve late records.
  std::vector<OpRecord> take(const OpTable& ops, std::int32_t default_step);
  const DecodeStats& stats() const { return stats_; }

 private:
  enum class ItemKind { Kernel, Memcpy, Memset, Memory };
  struct Item {
    ItemKind kind;
    std::int64_t start = 0, end = 0;
    std::uint32_t corr = 0, corr2 = 0;
    std::uint64_t bytes = 0;
    Stream stream = Stream::Compute;
    std::string name;
  };
  std::vector<Item> items_;
  std::unordered_map<std::uint32_t, std::uint64_t> ext_, prev_ext_;
  DecodeStats stats_;
};

// --- record mode files ---

struct RecordedEntry {
  std::size_t offset = 0;
  std::uint32_t kind = 0;
  std::string name;  // empty when the record has none
};

struct RecordedBuffer {
  std::vector<std::uint8_t> bytes;  // 8-byte aligned copy of the buffer
  std::vector<RecordedEntry> entries;
  bool indexed = false;   // entries came from the .idx file
  std::int64_t offset_ns = 0;
  std::int32_t step = 0;  // the step unattributed records are given
  std::vector<std::uint64_t> storage_;  // alignment holder for bytes
  const std::uint8_t* data() const {
    return reinterpret_cast<const std::uint8_t*>(storage_.data());
  }
};

void write_recorded_buffer(const std::string& dir, unsigned seq, const std::uint8_t* data,
                           std::size_t valid, const std::vector<RecordedEntry>& entries,
                           std::int64_t offset_ns, std::int32_t step);
RecordedBuffer read_recorded_buffer(const std::string& bin_path);
void append_ops_tsv(const std::string& path, const OpTable& ops);
OpTable read_ops_tsv(const std::string& path);
// All buffers of a record directory (in file order) decoded against its ops.tsv.
std::vector<OpRecord> decode_recorded_dir(const std::string& dir, DecodeStats* stats = nullptr);

}  // namespace remat::cupti
