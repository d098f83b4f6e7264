// The few CUPTI calls the profiler uses, behind an interface so tests can replace CUPTI (and
// run without a GPU or a driver). make_real_cupti_api() forwards to libcupti; it lives in
// librematcuda.so only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <cupti_activity.h>

namespace remat::cupti {

using BufferRequestFn = void (*)(std::uint8_t** buffer, std::size_t* size,
                                 std::size_t* max_records);
using BufferCompleteFn = void (*)(CUcontext ctx, std::uint32_t stream_id, std::uint8_t* buffer,
                                  std::size_t size, std::size_t valid_size);

class CuptiApi {
 public:
  virtual ~CuptiApi() = default;
  virtual CUptiResult activity_enable(CUpti_ActivityKind kind) = 0;
  virtual CUptiResult activity_disable(CUpti_ActivityKind kind) = 0;
  virtual CUptiResult register_callbacks(BufferRequestFn request, BufferCompleteFn complete) = 0;
  virtual CUptiResult flush_all(std::uint32_t flag) = 0;
  virtual CUptiResult get_timestamp(std::uint64_t* ns) = 0;
  // CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0
  virtual CUptiResult push_external_id(std::uint64_t id) = 0;
  virtual CUptiResult pop_external_id(std::uint64_t* id) = 0;
  // Next record after *record (nullptr: the first); CUPTI_ERROR_MAX_LIMIT_REACHED at the end.
  virtual CUptiResult next_record(std::uint8_t* buffer, std::size_t valid_size,
                                  CUpti_Activity** record) = 0;
  virtual CUptiResult dropped_records(CUcontext ctx, std::uint32_t stream_id,
                                      std::size_t* dropped) = 0;
  virtual CUptiResult finalize() = 0;
  virtual std::string result_string(CUptiResult r) = 0;
  virtual std::string version() = 0;
};

std::unique_ptr<CuptiApi> make_real_cupti_api();

}  // namespace remat::cupti
