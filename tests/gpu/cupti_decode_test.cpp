// The CUPTI layers without a GPU: a fake CuptiApi delivers synthetic activity buffers (records
// out of order, split across buffers, buffers completed in reverse) and the profiler must turn
// them into the right OpRecord table; record-mode files must read back to the same records.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include "core/backend/cuda/cupti_profiler.h"
#include "core/util/error.h"
#include "tests/test_paths.h"

namespace remat::cupti {
namespace {

// A clock that reads what the test says (calibration sees a zero-width window).
class ManualClock final : public Clock {
 public:
  std::int64_t now_ns() override { return t; }
  std::int64_t t = 1'000'000;
};

class FakeApi final : public CuptiApi {
 public:
  BufferRequestFn request = nullptr;
  BufferCompleteFn complete = nullptr;
  std::vector<std::uint64_t> stack;
  std::uint64_t timestamp = 400'000;
  std::vector<int> enabled;
  // Runs on flush: the test delivers its buffers here.
  std::function<void()> on_flush;

  CUptiResult activity_enable(CUpti_ActivityKind k) override {
    enabled.push_back(static_cast<int>(k));
    return CUPTI_SUCCESS;
  }
  CUptiResult activity_disable(CUpti_ActivityKind) override { return CUPTI_SUCCESS; }
  CUptiResult register_callbacks(BufferRequestFn r, BufferCompleteFn c) override {
    request = r;
    complete = c;
    return CUPTI_SUCCESS;
  }
  CUptiResult flush_all(std::uint32_t) override {
    if (on_flush) on_flush();
    on_flush = nullptr;
    return CUPTI_SUCCESS;
  }
  CUptiResult get_timestamp(std::uint64_t* ns) override {
    *ns = timestamp;
    return CUPTI_SUCCESS;
  }
  CUptiResult push_external_id(std::uint64_t id) override {
    stack.push_back(id);
    return CUPTI_SUCCESS;
  }
  CUptiResult pop_external_id(std::uint64_t* id) override {
    if (stack.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
    *id = stack.back();
    stack.pop_back();
    return CUPTI_SUCCESS;
  }
  CUptiResult next_record(std::uint8_t* buffer, std::size_t valid, CUpti_Activity** rec) override {
    std::size_t off = 0;
    if (*rec) {
      off = static_cast<std::size_t>(reinterpret_cast<std::uint8_t*>(*rec) - buffer);
      off += (record_size(static_cast<std::uint32_t>((*rec)->kind)) + 7) / 8 * 8;
    }
    if (off + sizeof(CUpti_Activity) > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = reinterpret_cast<CUpti_Activity*>(buffer + off);
    return CUPTI_SUCCESS;
  }
  CUptiResult dropped_records(CUcontext, std::uint32_t, std::size_t* n) override {
    *n = 0;
    return CUPTI_SUCCESS;
  }
  CUptiResult finalize() override { return CUPTI_SUCCESS; }
  std::string result_string(CUptiResult r) override {
    return "fake CUPTI error " + std::to_string(static_cast<int>(r));
  }
  std::string version() override { return "fake"; }

  // Hands CUPTI's own callbacks a buffer holding `bytes` (as CUPTI would).
  void deliver(const std::vector<std::uint8_t>& bytes) {
    std::uint8_t* buf = nullptr;
    std::size_t size = 0, max_records = 0;
    request(&buf, &size, &max_records);
    ASSERT_NE(buf, nullptr);
    ASSERT_LE(bytes.size(), size);
    std::memcpy(buf, bytes.data(), bytes.size());
    complete(nullptr, 0, buf, size, bytes.size());
  }
};

// Builds buffers of records laid out as CUPTI lays them out (8-byte aligned, back to back).
class BufferBuilder {
 public:
  template <class R>
  BufferBuilder& add(const R& r) {
    const std::size_t off = bytes_.size();
    bytes_.resize(off + (sizeof(R) + 7) / 8 * 8, 0);
    std::memcpy(bytes_.data() + off, &r, sizeof(R));
    return *this;
  }
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

const char* kMangled = "_ZN5remat7kernels45_GLOBAL__N__007c117a_12_flash_fwd_cu_6449df8a12flash_fwd_tcILi64EEEvNS0_6detail8FlashDevE";

CUpti_ActivityKernel10 kernel(std::uint32_t corr, std::uint64_t start, std::uint64_t end,
                              const char* name) {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.correlationId = corr;
  k.start = start;
  k.end = end;
  k.name = name;
  k.streamId = 7;
  return k;
}

CUpti_ActivityMemcpy6 memcpy_rec(std::uint32_t corr, std::uint32_t rt_corr, std::uint8_t kind,
                                 std::uint64_t bytes, std::uint64_t start, std::uint64_t end) {
  CUpti_ActivityMemcpy6 m;
  std::memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = kind;
  m.bytes = bytes;
  m.start = start;
  m.end = end;
  m.correlationId = corr;
  m.runtimeCorrelationId = rt_corr;
  return m;
}

CUpti_ActivityMemset4 memset_rec(std::uint32_t corr, std::uint64_t bytes, std::uint64_t start,
                                 std::uint64_t end) {
  CUpti_ActivityMemset4 m;
  std::memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.bytes = bytes;
  m.start = start;
  m.end = end;
  m.correlationId = corr;
  return m;
}

CUpti_ActivityExternalCorrelation ext(std::uint32_t corr, std::uint64_t id) {
  CUpti_ActivityExternalCorrelation e;
  std::memset(&e, 0, sizeof e);
  e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  e.externalId = id;
  e.correlationId = corr;
  return e;
}

CUpti_ActivityAPI api_rec(std::uint32_t corr) {
  CUpti_ActivityAPI a;
  std::memset(&a, 0, sizeof a);
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.correlationId = corr;
  return a;
}

CUpti_ActivityMemory4 memory_rec(std::uint32_t corr, std::uint64_t bytes, std::uint64_t ts,
                                 bool release) {
  CUpti_ActivityMemory4 m;
  std::memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = release ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
                                  : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.bytes = bytes;
  m.timestamp = ts;
  m.correlationId = corr;
  return m;
}

OpInfo op(std::uint64_t id, const std::string& name, const std::string& step, int block,
          Phase ph, int train_step, std::uint64_t flops, std::uint64_t bytes) {
  OpInfo o;
  o.op_id = id;
  o.name = name;
  o.op = step;
  o.block = block;
  o.phase = ph;
  o.step = train_step;
  o.flops = flops;
  o.bytes = bytes;
  return o;
}

TEST(CuptiDecode, KernelNamesAreDemangledAndShortened) {
  EXPECT_EQ(kernel_display_name(kMangled), "remat::kernels::flash_fwd_tc<64>");
  EXPECT_EQ(kernel_display_name("sm90_xmma_gemm_bf16bf16_bf16f32"), "sm90_xmma_gemm_bf16bf16_bf16f32");
  EXPECT_EQ(kernel_display_name(nullptr), "?");
}

TEST(CuptiDecode, WalksRecordsBySize) {
  BufferBuilder b;
  b.add(kernel(1, 10, 20, kMangled)).add(memcpy_rec(2, 0, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 64, 30, 40))
      .add(ext(1, 99)).add(api_rec(1)).add(memset_rec(3, 8, 50, 60)).add(memory_rec(4, 512, 70, false));
  std::vector<std::size_t> offs;
  std::vector<int> kinds;
  std::string err;
  ASSERT_TRUE(walk_buffer(b.bytes().data(), b.bytes().size(),
                          [&](const CUpti_Activity* r, std::size_t off) {
                            offs.push_back(off);
                            kinds.push_back(static_cast<int>(r->kind));
                          },
                          &err))
      << err;
  ASSERT_EQ(offs.size(), 6u);
  EXPECT_EQ(offs[0], 0u);
  EXPECT_EQ(offs[1], sizeof(CUpti_ActivityKernel10));
  EXPECT_EQ(kinds[2], CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  // An unknown kind stops the walk with a reason.
  std::vector<std::uint8_t> bad(16, 0);
  const std::uint32_t unknown = 9999;
  std::memcpy(bad.data(), &unknown, 4);
  EXPECT_FALSE(walk_buffer(bad.data(), bad.size(), [](const CUpti_Activity*, std::size_t) {}, &err));
  EXPECT_NE(err.find("unknown activity kind"), std::string::npos);
}

class CuptiProfilerFake : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = std::make_unique<FakeApi>();
    api = a.get();
    clock.t = 1'000'000;
    api->timestamp = 400'000;  // offset = 600'000 ns
    prof = std::make_unique<CuptiProfiler>(std::move(a), clock, dir_);
  }
  void TearDown() override {
    prof.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  ManualClock clock;
  FakeApi* api = nullptr;
  std::unique_ptr<CuptiProfiler> prof;
  std::string dir_;
};

TEST_F(CuptiProfilerFake, EnablesTheKindsItDecodes) {
  for (int k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMORY2,
                CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION})
    EXPECT_NE(std::find(api->enabled.begin(), api->enabled.end(), k), api->enabled.end()) << k;
  EXPECT_EQ(prof->clock_offset_ns(), 600'000);
}

TEST(CuptiApiKinds, EnvironmentChoosesTheApiRecords) {
  auto has = [](const FakeApi& a, int k) {
    return std::find(a.enabled.begin(), a.enabled.end(), k) != a.enabled.end();
  };
  struct Case {
    const char* env;
    bool runtime, driver;
  };
  for (const Case& c : {Case{"", true, true}, Case{"both", true, true},
                        Case{"driver", false, true}, Case{"runtime", true, false}}) {
    ::setenv("REMAT_CUPTI_API", c.env, 1);
    ManualClock clock;
    auto a = std::make_unique<FakeApi>();
    FakeApi* api = a.get();
    CuptiProfiler prof(std::move(a), clock, "");
    EXPECT_EQ(has(*api, CUPTI_ACTIVITY_KIND_RUNTIME), c.runtime) << c.env;
    EXPECT_EQ(has(*api, CUPTI_ACTIVITY_KIND_DRIVER), c.driver) << c.env;
    EXPECT_TRUE(has(*api, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) << c.env;
  }
  ::setenv("REMAT_CUPTI_API", "kernels", 1);
  ManualClock clock;
  try {
    CuptiProfiler prof(std::make_unique<FakeApi>(), clock, "");
    ADD_FAILURE() << "REMAT_CUPTI_API=kernels was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("REMAT_CUPTI_API"), std::string::npos) << e.what();
  }
  ::unsetenv("REMAT_CUPTI_API");
}

TEST_F(CuptiProfilerFake, OutOfOrderBuffersMapToTheRightOps) {
  OpInfo qkv = op(7, "h1.attn.qkv", "attn.qkv", 1, Phase::Backward, 3, 1000, 2000);
  OpInfo off = op(8, "h1.offload", "offload", 1, Phase::Forward, 3, 0, 4096);
  prof->begin_op(qkv);
  EXPECT_EQ(api->stack, std::vector<std::uint64_t>{7});
  prof->end_op(qkv);
  prof->begin_op(off);
  prof->end_op(off);
  EXPECT_TRUE(api->stack.empty());
  api->on_flush = [&] {
    // Buffer 1 (completes first) holds only correlation records and API records; buffer 2 the
    // activity, in reverse time order; the correlation of corr 103 is in buffer 3.
    BufferBuilder b1, b2, b3;
    b1.add(api_rec(101)).add(ext(101, 7)).add(ext(102, 7)).add(ext(201, 8)).add(api_rec(102));
    b2.add(memcpy_rec(201, 0, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 4096, 5000, 6000))
        .add(kernel(102, 3000, 3500, "sm90_gemm"))
        .add(kernel(101, 1000, 2000, kMangled))
        .add(kernel(999, 2500, 2600, "stray"))
        .add(memset_rec(103, 256, 2700, 2800))
        .add(memory_rec(104, 1 << 20, 900, false));
    b3.add(ext(103, 7)).add(ext(104, 8));
    api->deliver(b3.bytes());
    api->deliver(b1.bytes());
    api->deliver(b2.bytes());
  };
  std::vector<OpRecord> r = prof->collect();
  ASSERT_EQ(r.size(), 6u);
  const std::int64_t o = 600'000;
  // Sorted by start on the run's clock.
  EXPECT_EQ(r[0].name.rfind("memory allocation (", 0), 0u) << r[0].name;
  EXPECT_EQ(r[0].start_ns, 900 + o);
  EXPECT_EQ(r[0].stream, Stream::Host);
  EXPECT_EQ(r[0].op_id, 8u);
  EXPECT_EQ(r[0].bytes, 1u << 20);
  EXPECT_EQ(r[1].name, "remat::kernels::flash_fwd_tc<64>");
  EXPECT_EQ(r[1].start_ns, 1000 + o);
  EXPECT_EQ(r[1].end_ns, 2000 + o);
  EXPECT_EQ(r[1].op_id, 7u);
  EXPECT_EQ(r[1].op, "attn.qkv");
  EXPECT_EQ(r[1].block, 1);
  EXPECT_EQ(r[1].phase, Phase::Backward);
  EXPECT_EQ(r[1].step, 3);
  EXPECT_EQ(r[1].flops, 1000u);  // the op's first kernel carries its flops and bytes
  EXPECT_EQ(r[1].bytes, 2000u);
  EXPECT_EQ(r[1].stream, Stream::Compute);
  EXPECT_EQ(r[2].name, "stray");
  EXPECT_EQ(r[2].op_id, 0u);
  EXPECT_EQ(r[2].op, "");
  EXPECT_EQ(r[2].step, 3);  // unattributed records get the current step
  EXPECT_EQ(r[3].name, "memset");
  EXPECT_EQ(r[3].op_id, 7u);
  EXPECT_EQ(r[3].bytes, 256u);
  EXPECT_EQ(r[3].flops, 0u);
  EXPECT_EQ(r[4].name, "sm90_gemm");
  EXPECT_EQ(r[4].op_id, 7u);
  EXPECT_EQ(r[4].flops, 0u);  // not the op's first kernel
  EXPECT_EQ(r[5].name, "memcpy DtoH");
  EXPECT_EQ(r[5].stream, Stream::CopyToHost);
  EXPECT_EQ(r[5].op_id, 8u);
  EXPECT_EQ(r[5].op, "offload");
  EXPECT_EQ(r[5].bytes, 4096u);
  EXPECT_EQ(prof->stats().buffers, 3u);
  EXPECT_EQ(prof->stats().decode.unattributed, 1u);
  EXPECT_GT(prof->overhead_ns(), 0);
}

TEST_F(CuptiProfilerFake, CorrelationFromAnEarlierCollectStillResolves) {
  OpInfo a = op(31, "h0.attn.flash", "attn.flash", 0, Phase::Forward, 1, 10, 20);
  prof->begin_op(a);
  prof->end_op(a);
  api->on_flush = [&] {
    BufferBuilder b;
    b.add(ext(500, 31)).add(memcpy_rec(0, 501, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 64, 100, 200))
        .add(ext(501, 31));
    api->deliver(b.bytes());
  };
  std::vector<OpRecord> r1 = prof->collect();
  ASSERT_EQ(r1.size(), 1u);  // the copy matched through its runtime correlation id
  EXPECT_EQ(r1[0].stream, Stream::CopyToDevice);
  EXPECT_EQ(r1[0].op_id, 31u);
  api->on_flush = [&] {
    BufferBuilder b;
    b.add(kernel(500, 300, 400, "late_kernel"));
    api->deliver(b.bytes());
  };
  std::vector<OpRecord> r2 = prof->collect();
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r2[0].op_id, 31u);
  EXPECT_EQ(r2[0].op, "attn.flash");
}

// A collective is one record on the comm stream, timed by its call, with its group's global
// ranks; NCCL's kernel (attributed to it, or launched from NCCL's own thread and unattributed)
// is not listed beside it, other kernels are.
TEST_F(CuptiProfilerFake, CollectivesAreTheirCallsWithTheirRanks) {
  NullCommunicator dp(1, 2), tp(0, 2);
  prof->set_comm_groups(layout_groups(&dp, &tp));  // global ranks: dp rank d, tp rank t -> 2d + t
  OpInfo c = op(9, "grads.all_reduce", "all_reduce", -1, Phase::Optimizer, 2, 0, 4000);
  c.stream = Stream::Comm;
  OpInfo g = op(10, "h0.mlp.fc", "mlp.fc", 0, Phase::Backward, 2, 50, 60);
  clock.t = 2'000'000;
  prof->begin_op(c);
  std::vector<float> grads(1000);
  dp.all_reduce_sum(grads.data(), grads.size(), "grads");
  clock.t = 2'500'000;
  prof->end_op(c);
  prof->begin_op(g);
  prof->end_op(g);
  api->on_flush = [&] {
    BufferBuilder b;
    b.add(api_rec(301)).add(ext(301, 9)).add(api_rec(302)).add(ext(302, 10));
    b.add(kernel(301, 1'500'000, 1'800'000, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"))
        .add(kernel(0, 1'500'000, 1'800'000, "ncclDevKernel_SendRecv"))
        .add(kernel(302, 1'900'000, 1'950'000, "sm90_gemm"));
    api->deliver(b.bytes());
  };
  const std::vector<OpRecord> r = prof->collect();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].name, "grads.all_reduce");
  EXPECT_EQ(r[0].stream, Stream::Comm);
  EXPECT_EQ(r[0].start_ns, 2'000'000);
  EXPECT_EQ(r[0].end_ns, 2'500'000);
  EXPECT_EQ(r[0].bytes, 4000u);
  EXPECT_EQ(r[0].op_id, 9u);
  EXPECT_EQ(r[0].ranks, (std::vector<std::int32_t>{0, 2}));  // the dp group of tp rank 0
  EXPECT_EQ(r[1].name, "sm90_gemm");
  EXPECT_EQ(r[1].op_id, 10u);
  EXPECT_TRUE(r[1].ranks.empty());
  // A late NCCL kernel of that collective, delivered with the next collect, is dropped too.
  api->on_flush = [&] {
    BufferBuilder b;
    b.add(kernel(301, 1'600'000, 1'700'000, "late"));
    api->deliver(b.bytes());
  };
  EXPECT_TRUE(prof->collect().empty());
}

TEST_F(CuptiProfilerFake, UnbalancedOpsAreAnError) {
  OpInfo a = op(1, "a", "a", 0, Phase::Forward, 0, 0, 0);
  OpInfo b = op(2, "b", "b", 0, Phase::Forward, 0, 0, 0);
  prof->begin_op(a);
  EXPECT_THROW(prof->end_op(b), Error);
  EXPECT_THROW(prof->end_op(a), Error);  // the stack is empty now
}

class CuptiRecordMode : public CuptiProfilerFake {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("remat_cupti_unit_" + std::to_string(reinterpret_cast<std::uintptr_t>(this))))
               .string();
    std::filesystem::remove_all(dir_);
    CuptiProfilerFake::SetUp();
  }
};

TEST_F(CuptiRecordMode, DumpedBuffersDecodeToTheSameRecords) {
  OpInfo a = op(41, "h2.mlp.fc", "mlp.fc", 2, Phase::Recompute, 9, 77, 88);
  prof->begin_op(a);
  prof->end_op(a);
  api->on_flush = [&] {
    BufferBuilder b1, b2;
    b1.add(kernel(601, 1000, 1100, kMangled)).add(kernel(602, 1200, 1300, "sm90_gemm"));
    b2.add(ext(601, 41)).add(ext(602, 41)).add(memset_rec(603, 16, 900, 950));
    api->deliver(b1.bytes());
    api->deliver(b2.bytes());
  };
  std::vector<OpRecord> live = prof->collect();
  EXPECT_EQ(prof->stats().recorded_files, 2u);
  EXPECT_EQ(prof->stats().walker_mismatches, 0u);
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/buffer_000.bin"));
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/buffer_000.idx"));
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/ops.tsv"));
  DecodeStats st;
  std::vector<OpRecord> back = decode_recorded_dir(dir_, &st);
  ASSERT_EQ(back.size(), live.size());
  for (std::size_t i = 0; i < live.size(); ++i) {
    EXPECT_EQ(back[i].name, live[i].name);
    EXPECT_EQ(back[i].start_ns, live[i].start_ns);
    EXPECT_EQ(back[i].end_ns, live[i].end_ns);
    EXPECT_EQ(back[i].op_id, live[i].op_id);
    EXPECT_EQ(back[i].op, live[i].op);
    EXPECT_EQ(back[i].block, live[i].block);
    EXPECT_EQ(back[i].phase, live[i].phase);
    EXPECT_EQ(back[i].step, live[i].step);
    EXPECT_EQ(back[i].flops, live[i].flops);
  }
  EXPECT_EQ(st.kernels, 2u);
  // Without its .idx, a buffer is walked by record sizes (names are then unknown).
  std::filesystem::remove(dir_ + "/buffer_001.idx");
  RecordedBuffer rb = read_recorded_buffer(dir_ + "/buffer_001.bin");
  EXPECT_FALSE(rb.indexed);
  ASSERT_EQ(rb.entries.size(), 3u);
  EXPECT_EQ(rb.entries[2].kind, static_cast<std::uint32_t>(CUPTI_ACTIVITY_KIND_MEMSET));
  // ops.tsv round-trips the op table.
  OpTable ops = read_ops_tsv(dir_ + "/ops.tsv");
  ASSERT_EQ(ops.count(41), 1u);
  EXPECT_EQ(ops[41].name, "h2.mlp.fc");
  EXPECT_EQ(ops[41].phase, Phase::Recompute);
  EXPECT_EQ(ops[41].flops, 77u);
}

// Buffers recorded by a real run (GpuProfiler.AttributesKernelsAndCopiesToOps on an H200 with
// CUDA 13.0): the decoder reads them back without CUPTI or a GPU.
TEST(CuptiRecorded, RealH200BuffersDecode) {
  const std::string dir = std::string(REMAT_SOURCE_DIR) + "/tests/gpu/data/cupti_h200";
  DecodeStats st;
  std::vector<OpRecord> r = decode_recorded_dir(dir, &st);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(st.kernels, 3u);  // gelu, the GEMM, gelu again in the second step
  std::map<std::uint64_t, std::vector<const OpRecord*>> by_op;
  for (const OpRecord& x : r) by_op[x.op_id].push_back(&x);
  for (std::size_t i = 1; i < r.size(); ++i) EXPECT_LE(r[i - 1].start_ns, r[i].start_ns);
  ASSERT_EQ(by_op[11].size(), 1u);
  EXPECT_EQ(by_op[11][0]->op, "mlp.gelu");
  EXPECT_NE(by_op[11][0]->name.find("GeluFwd"), std::string::npos) << by_op[11][0]->name;
  EXPECT_EQ(by_op[11][0]->flops, 123u);
  ASSERT_EQ(by_op[12].size(), 1u);
  EXPECT_EQ(by_op[12][0]->stream, Stream::CopyToHost);
  EXPECT_EQ(by_op[12][0]->bytes, 2u << 20);
  bool memset = false, gemm = false;
  for (const OpRecord* x : by_op[13]) {
    memset |= x->name == "memset";
    gemm |= x->name != "memset";
    EXPECT_EQ(x->phase, Phase::Backward);
    EXPECT_EQ(x->block, 1);
  }
  EXPECT_TRUE(memset && gemm);
  ASSERT_EQ(by_op[14].size(), 1u);
  EXPECT_EQ(by_op[14][0]->stream, Stream::CopyToDevice);
  ASSERT_EQ(by_op[21].size(), 1u);
  // Our record sizes walk the real buffers to the offsets CUPTI's own walk recorded.
  for (const char* f : {"/buffer_000", "/buffer_001"}) {
    RecordedBuffer indexed = read_recorded_buffer(dir + f + ".bin");
    ASSERT_TRUE(indexed.indexed);
    std::vector<std::size_t> ours;
    std::string err;
    ASSERT_TRUE(walk_buffer(indexed.data(), indexed.bytes.size(),
                            [&](const CUpti_Activity*, std::size_t off) { ours.push_back(off); },
                            &err))
        << err;
    ASSERT_EQ(ours.size(), indexed.entries.size()) << f;
    for (std::size_t i = 0; i < ours.size(); ++i) EXPECT_EQ(ours[i], indexed.entries[i].offset);
  }
}

TEST(CuptiBuffers, OnlyOneOwnerAtATime) {
  ActivityBuffers a, b;
  a.install();
  EXPECT_THROW(b.install(), Error);
  a.uninstall();
  b.install();
  std::uint8_t* buf = nullptr;
  std::size_t size = 0, maxr = 0;
  ActivityBuffers::request(&buf, &size, &maxr);
  ASSERT_NE(buf, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buf) % 8, 0u);
  EXPECT_EQ(size, b.buffer_bytes());
  ActivityBuffers::complete(nullptr, 3, buf, size, 0);
  auto done = b.take_completed();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].stream_id, 3u);
  b.recycle(done[0]);
  b.uninstall();
}

}  // namespace
}  // namespace remat::cupti
