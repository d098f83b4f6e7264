// CuptiApi over libcupti.
#include <cupti.h>

#include "core/backend/cuda/cupti_api.h"

namespace remat::cupti {

namespace {

class RealCuptiApi final : public CuptiApi {
 public:
  CUptiResult activity_enable(CUpti_ActivityKind kind) override { return cuptiActivityEnable(kind); }
  CUptiResult activity_disable(CUpti_ActivityKind kind) override {
    return cuptiActivityDisable(kind);
  }
  CUptiResult register_callbacks(BufferRequestFn request, BufferCompleteFn complete) override {
    return cuptiActivityRegisterCallbacks(request, complete);
  }
  CUptiResult flush_all(std::uint32_t flag) override { return cuptiActivityFlushAll(flag); }
  CUptiResult get_timestamp(std::uint64_t* ns) override { return cuptiGetTimestamp(ns); }
  CUptiResult push_external_id(std::uint64_t id) override {
    return cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
  }
  CUptiResult pop_external_id(std::uint64_t* id) override {
    return cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
  }
  CUptiResult next_record(std::uint8_t* buffer, std::size_t valid_size,
                          CUpti_Activity** record) override {
    return cuptiActivityGetNextRecord(buffer, valid_size, record);
  }
  CUptiResult dropped_records(CUcontext ctx, std::uint32_t stream_id,
                              std::size_t* dropped) override {
    return cuptiActivityGetNumDroppedRecords(ctx, stream_id, dropped);
  }
  CUptiResult finalize() override { return cuptiFinalize(); }
  std::string result_string(CUptiResult r) override {
    const char* s = nullptr;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
      return "CUPTI error " + std::to_string(static_cast<int>(r));
    return s;
  }
  std::string version() override {
    std::uint32_t v = 0;
    if (cuptiGetVersion(&v) != CUPTI_SUCCESS) return "unknown";
    return std::to_string(v);
  }
};

}  // namespace

std::unique_ptr<CuptiApi> make_real_cupti_api() { return std::make_unique<RealCuptiApi>(); }

}  // namespace remat::cupti
