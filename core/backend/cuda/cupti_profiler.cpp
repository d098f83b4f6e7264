#include "core/backend/cuda/cupti_profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <tuple>
#include <filesystem>
#include <fstream>

#include <cupti_version.h>

#include "core/util/error.h"

namespace remat::cupti {

namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The activity kinds we decode, plus the API records external correlation hangs on.
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER};

// Which API record kinds to enable (REMAT_CUPTI_API): external correlation records need one of
// them; "both" (the default), "driver" or "runtime". Fewer API records cost less per launch.
std::string api_kinds_from_env() {
  const char* e = std::getenv("REMAT_CUPTI_API");
  const std::string v = e ? e : "";
  if (v.empty() || v == "both") return "both";
  if (v == "driver" || v == "runtime") return v;
  throw Error("REMAT_CUPTI_API must be both, driver or runtime, got '" + v + "'");
}

}  // namespace

CuptiProfiler::CuptiProfiler(std::unique_ptr<CuptiApi> api, Clock& clock, std::string record_dir,
                             std::size_t buffer_bytes)
    : api_(std::move(api)), clock_(clock), record_dir_(std::move(record_dir)),
      buffers_(buffer_bytes) {
  if (!api_) throw Error("CUPTI profiler: no CUPTI API");
  if (record_dir_.empty())
    if (const char* e = std::getenv("REMAT_CUPTI_RECORD_DIR")) record_dir_ = e;
  if (!record_dir_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(record_dir_, ec);
    if (ec)
      throw Error("CUPTI record mode: cannot create " + record_dir_ + ": " + ec.message());
    std::ofstream meta(record_dir_ + "/meta.txt", std::ios::app);
    meta << "cupti_version " << api_->version() << "\n"
         << "header_api_version " << CUPTI_API_VERSION << "\n"
         << "sizeof_kernel " << sizeof(CUpti_ActivityKernel10) << " sizeof_memcpy "
         << sizeof(CUpti_ActivityMemcpy6) << " sizeof_memset " << sizeof(CUpti_ActivityMemset4)
         << " sizeof_memory " << sizeof(CUpti_ActivityMemory4) << " sizeof_external "
         << sizeof(CUpti_ActivityExternalCorrelation) << " sizeof_api "
         << sizeof(CUpti_ActivityAPI) << "\n";
  }
  buffers_.install();
  try {
    check(api_->register_callbacks(&ActivityBuffers::request, &ActivityBuffers::complete),
          "cuptiActivityRegisterCallbacks");
    const std::string api_kinds = api_kinds_from_env();
    for (CUpti_ActivityKind k : kKinds) {
      if ((k == CUPTI_ACTIVITY_KIND_RUNTIME && api_kinds == "driver") ||
          (k == CUPTI_ACTIVITY_KIND_DRIVER && api_kinds == "runtime")) {
        stats_.kinds_not_enabled += std::to_string(static_cast<int>(k)) + " (REMAT_CUPTI_API=" +
                                    api_kinds + ") ";
        continue;
      }
      const CUptiResult r = api_->activity_enable(k);
      // Allocation records and driver API records are extras: go on without them.
      if (r != CUPTI_SUCCESS &&
          (k == CUPTI_ACTIVITY_KIND_MEMORY2 || k == CUPTI_ACTIVITY_KIND_DRIVER)) {
        stats_.kinds_not_enabled += std::to_string(static_cast<int>(k)) + " (" +
                                    api_->result_string(r) + ") ";
        continue;
      }
      check(r, ("cuptiActivityEnable(kind " + std::to_string(static_cast<int>(k)) + ")").c_str());
    }
    enabled_ = true;
    calibrate();
  } catch (...) {
    for (CUpti_ActivityKind k : kKinds) api_->activity_disable(k);
    buffers_.uninstall();
    throw;
  }
}

CuptiProfiler::~CuptiProfiler() {
  // Stop recording, hand back what CUPTI still holds, and detach; errors are ignored here.
  if (enabled_) {
    for (CUpti_ActivityKind k : kKinds) api_->activity_disable(k);
    api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  for (const CompletedBuffer& b : buffers_.take_completed()) buffers_.recycle(b);
  buffers_.uninstall();
}

void CuptiProfiler::check(CUptiResult r, const char* call) {
  if (r != CUPTI_SUCCESS)
    throw Error(std::string("CUPTI error in ") + call + ": " + api_->result_string(r));
}

void CuptiProfiler::calibrate() {
  std::int64_t best_span = -1, best = 0;
  for (int i = 0; i < 5; ++i) {
    std::uint64_t ts = 0;
    const std::int64_t a = clock_.now_ns();
    check(api_->get_timestamp(&ts), "cuptiGetTimestamp");
    const std::int64_t b = clock_.now_ns();
    const std::int64_t span = b - a;
    if (best_span < 0 || span < best_span) {
      best_span = span;
      best = a + span / 2 - static_cast<std::int64_t>(ts);
    }
  }
  offset_ns_ = best;
}

void CuptiProfiler::begin_op(const OpInfo& op) {
  ops_[op.op_id] = op;
  last_step_ = op.step;
  check(api_->push_external_id(op.op_id), "cuptiActivityPushExternalCorrelationId");
  if (op.stream == Stream::Comm) {
    note_comm_start();
    comm_begun_ = clock_.now_ns();
  }
}

void CuptiProfiler::end_op(const OpInfo& op) {
  std::uint64_t id = 0;
  check(api_->pop_external_id(&id), "cuptiActivityPopExternalCorrelationId");
  if (id != op.op_id)
    throw Error("CUPTI: popped external correlation id " + std::to_string(id) + " at the end of op " +
                std::to_string(op.op_id) + " (" + op.name + "); begin_op/end_op are unbalanced");
  if (op.stream != Stream::Comm) return;
  // A collective returns once NCCL's stream has run it: the call's time is the collective's.
  comm_.push_back(timed_record(op, comm_begun_, clock_.now_ns()));
  comm_ids_.insert(op.op_id);
}

std::vector<OpRecord> CuptiProfiler::collect() {
  const std::int64_t t0 = steady_ns();
  check(api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  calibrate();
  std::vector<CompletedBuffer> done = buffers_.take_completed();
  OpTable table = prev_ops_;
  for (const auto& [id, info] : ops_) table[id] = info;
  try {
    for (const CompletedBuffer& b : done) {
      ++stats_.buffers;
      std::vector<RecordedEntry> entries;
      CUpti_Activity* rec = nullptr;
      for (;;) {
        CUptiResult r = api_->next_record(b.data, b.valid, &rec);
        if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
        check(r, "cuptiActivityGetNextRecord");
        ++stats_.records;
        decoder_.add(rec, offset_ns_);
        if (!record_dir_.empty()) {
          RecordedEntry e;
          e.offset = static_cast<std::size_t>(reinterpret_cast<std::uint8_t*>(rec) - b.data);
          e.kind = static_cast<std::uint32_t>(rec->kind);
          if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
              rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const char* n = reinterpret_cast<const CUpti_ActivityKernel10*>(rec)->name;
            e.name = n ? n : "";
          }
          entries.push_back(std::move(e));
        }
      }
      if (!record_dir_.empty()) {
        // Check our own record sizes against CUPTI's walk, so the decoder can read buffers
        // without an index.
        std::vector<std::size_t> ours;
        std::string err;
        walk_buffer(b.data, b.valid, [&](const CUpti_Activity*, std::size_t off) { ours.push_back(off); },
                    &err);
        bool same = err.empty() && ours.size() == entries.size();
        for (std::size_t i = 0; same && i < ours.size(); ++i) same = ours[i] == entries[i].offset;
        if (!same) ++stats_.walker_mismatches;
        write_recorded_buffer(record_dir_, next_file_++, b.data, b.valid, entries, offset_ns_,
                              last_step_);
        ++stats_.recorded_files;
      }
      buffers_.recycle(b);
    }
  } catch (...) {
    for (const CompletedBuffer& b : done) buffers_.recycle(b);
    throw;
  }
  std::size_t dropped = 0;
  if (api_->dropped_records(nullptr, 0, &dropped) == CUPTI_SUCCESS) stats_.dropped += dropped;
  if (!record_dir_.empty()) {
    append_ops_tsv(record_dir_ + "/ops.tsv", ops_);
    std::ofstream meta(record_dir_ + "/meta.txt", std::ios::app);
    meta << "collect buffers=" << done.size() << " offset_ns=" << offset_ns_
         << " walker_mismatches=" << stats_.walker_mismatches << " dropped=" << stats_.dropped
         << "\n";
  }
  std::vector<OpRecord> out = decoder_.take(table, last_step_);
  stats_.decode = decoder_.stats();
  // A collective is its call's record: what CUPTI saw of it (NCCL's kernels, launched from the
  // call or from NCCL's own thread, and the copies of a staged host buffer) is inside that time.
  const auto inside_a_collective = [&](const OpRecord& r) {
    return (r.op_id != 0 && (comm_ids_.count(r.op_id) != 0 || prev_comm_ids_.count(r.op_id) != 0)) ||
           (r.stream == Stream::Compute && r.name.rfind("nccl", 0) == 0);
  };
  out.erase(std::remove_if(out.begin(), out.end(), inside_a_collective), out.end());
  if (!comm_.empty()) {
    out.insert(out.end(), std::make_move_iterator(comm_.begin()), std::make_move_iterator(comm_.end()));
    comm_.clear();
    std::stable_sort(out.begin(), out.end(), [](const OpRecord& a, const OpRecord& b) {
      return std::tie(a.start_ns, a.end_ns, a.stream, a.op_id, a.name) <
             std::tie(b.start_ns, b.end_ns, b.stream, b.op_id, b.name);
    });
  }
  // Kernels of this step's collectives may still arrive with the next collect.
  prev_comm_ids_.swap(comm_ids_);
  comm_ids_.clear();
  prev_ops_ = std::move(ops_);
  ops_.clear();
  overhead_ns_ += steady_ns() - t0;
  return out;
}

std::int64_t CuptiProfiler::overhead_ns() const { return overhead_ns_ + buffers_.callback_ns(); }

}  // namespace remat::cupti
