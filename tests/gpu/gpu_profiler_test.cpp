// The CUPTI profiler on a real GPU: kernels, copies and memsets attributed to the executor's ops
// through external correlation ids, timestamps on the run's clock and in order, copy-stream
// memcpys mapped to CopyToHost / CopyToDevice, and record mode: the dumped buffers decode back
// to the same records.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <unistd.h>

#include "core/backend/cuda/cupti_profiler.h"
#include "tests/gpu/gpu_test_util.h"

namespace remat::gputest {
namespace {

OpInfo op(std::uint64_t id, const std::string& name, const std::string& step_name, int block,
          Phase phase, std::uint64_t flops, Stream s = Stream::Compute) {
  OpInfo o;
  o.op_id = id;
  o.name = name;
  o.op = step_name;
  o.block = block;
  o.phase = phase;
  o.step = 4;
  o.flops = flops;
  o.bytes = 1000 + id;
  o.stream = s;
  return o;
}

TEST(GpuProfiler, AttributesKernelsAndCopiesToOps) {
  REMAT_REQUIRE_GPU();
  Dual d(std::size_t{64} << 20);
  cuda::CudaBackend& g = *d.gpu;
  SteadyClock clock;
  // REMAT_CUPTI_TEST_RECORD_DIR keeps the recorded buffers (test data for the decoder).
  const char* keep = std::getenv("REMAT_CUPTI_TEST_RECORD_DIR");
  const std::string dir =
      keep ? std::string(keep)
           : (std::filesystem::temp_directory_path() /
              ("remat_cupti_record_" + std::to_string(::getpid())))
                 .string();
  std::filesystem::remove_all(dir);
  auto prof = std::make_unique<cupti::CuptiProfiler>(cupti::make_real_cupti_api(), clock, dir);
  EXPECT_EQ(prof->name(), "cupti");

  const std::int64_t n = 1 << 20, M = 256;
  const int K = 256, N = 512;
  Both x = d.random(DType::BF16, n, -1.0f, 1.0f, 1);
  Both W = d.random(DType::BF16, static_cast<std::int64_t>(N) * K, -1.0f, 1.0f, 2);
  Tensor y = d.gpu_alloc(DType::BF16, n);
  Tensor ly = d.gpu_alloc(DType::BF16, M * N);
  Tensor host = d.gpu_alloc(DType::BF16, n, Space::Host);
  g.synchronize();

  const std::int64_t t0 = clock.now_ns();
  OpInfo o1 = op(11, "h0.mlp.gelu", "mlp.gelu", 0, Phase::Forward, 123);
  prof->begin_op(o1);
  g.gelu_fwd(x.g, y, n);
  prof->end_op(o1);
  OpInfo o2 = op(12, "h0.offload", "offload", 0, Phase::Forward, 0, Stream::CopyToHost);
  prof->begin_op(o2);
  g.copy(host, y);
  prof->end_op(o2);
  OpInfo o3 = op(13, "h1.attn.qkv", "attn.qkv", 1, Phase::Backward, 456);
  prof->begin_op(o3);
  g.linear_fwd(x.g.slice(0, M * K), W.g, nullptr, ly, M, K, N);
  g.fill_zero(y);
  prof->end_op(o3);
  OpInfo o4 = op(14, "h0.prefetch", "prefetch", 0, Phase::Backward, 0, Stream::CopyToDevice);
  prof->begin_op(o4);
  g.copy(y, host);
  prof->end_op(o4);
  g.synchronize();
  const std::int64_t t1 = clock.now_ns();

  std::vector<OpRecord> recs = prof->collect();
  ASSERT_FALSE(recs.empty());
  std::map<std::uint64_t, std::vector<const OpRecord*>> by_op;
  for (const OpRecord& r : recs) by_op[r.op_id].push_back(&r);
  for (std::size_t i = 1; i < recs.size(); ++i)
    EXPECT_LE(recs[i - 1].start_ns, recs[i].start_ns) << "records not in time order";
  for (const OpRecord& r : recs) {
    EXPECT_LE(r.start_ns, r.end_ns) << r.name;
    if (r.op_id >= 11 && r.op_id <= 14) {
      // On the run's clock: inside the window (with 2 ms of calibration slack).
      EXPECT_GE(r.start_ns, t0 - 2000000) << r.name;
      EXPECT_LE(r.end_ns, t1 + 2000000) << r.name;
    }
  }
  ASSERT_TRUE(by_op.count(11)) << "no record attributed to the gelu op";
  std::uint64_t flops11 = 0;
  for (const OpRecord* r : by_op[11]) {
    EXPECT_EQ(r->op, "mlp.gelu");
    EXPECT_EQ(r->block, 0);
    EXPECT_EQ(r->phase, Phase::Forward);
    EXPECT_EQ(r->step, 4);
    EXPECT_EQ(r->stream, Stream::Compute);
    flops11 += r->flops;
  }
  EXPECT_EQ(flops11, 123u) << "the op's flops belong on exactly one of its records";
  ASSERT_TRUE(by_op.count(12)) << "no record attributed to the offload";
  bool d2h = false;
  for (const OpRecord* r : by_op[12])
    if (r->stream == Stream::CopyToHost && r->bytes == static_cast<std::uint64_t>(n) * 2) d2h = true;
  EXPECT_TRUE(d2h) << "the offload's memcpy is not on CopyToHost with its byte count";
  ASSERT_TRUE(by_op.count(13)) << "no record attributed to the linear op";
  bool gemm = false, memset = false;
  for (const OpRecord* r : by_op[13]) {
    EXPECT_EQ(r->phase, Phase::Backward);
    EXPECT_EQ(r->block, 1);
    gemm |= r->stream == Stream::Compute && r->name.rfind("memset", 0) != 0;
    memset |= r->name == "memset";
  }
  EXPECT_TRUE(gemm);
  EXPECT_TRUE(memset);
  ASSERT_TRUE(by_op.count(14));
  bool h2d = false;
  for (const OpRecord* r : by_op[14]) h2d |= r->stream == Stream::CopyToDevice;
  EXPECT_TRUE(h2d);
  EXPECT_GT(prof->overhead_ns(), 0);
  EXPECT_EQ(prof->stats().dropped, 0u);

  // Record mode: the dumped buffers decode to the same records.
  EXPECT_GT(prof->stats().recorded_files, 0u);
  EXPECT_EQ(prof->stats().walker_mismatches, 0u)
      << "our record sizes disagree with cuptiActivityGetNextRecord (see meta.txt)";
  cupti::DecodeStats ds;
  std::vector<OpRecord> back = cupti::decode_recorded_dir(dir, &ds);
  ASSERT_EQ(back.size(), recs.size());
  for (std::size_t i = 0; i < recs.size(); ++i) {
    EXPECT_EQ(back[i].name, recs[i].name);
    EXPECT_EQ(back[i].op_id, recs[i].op_id);
    EXPECT_EQ(back[i].op, recs[i].op);
    EXPECT_EQ(back[i].stream, recs[i].stream);
    EXPECT_EQ(back[i].start_ns, recs[i].start_ns);
    EXPECT_EQ(back[i].end_ns, recs[i].end_ns);
  }
  // A second step: nothing left over from the first.
  OpInfo o5 = op(21, "h0.mlp.gelu", "mlp.gelu", 0, Phase::Forward, 7);
  prof->begin_op(o5);
  g.gelu_fwd(x.g, y, n);
  prof->end_op(o5);
  g.synchronize();
  std::vector<OpRecord> recs2 = prof->collect();
  ASSERT_FALSE(recs2.empty());
  bool saw21 = false;
  for (const OpRecord& r : recs2) {
    EXPECT_NE(r.op_id, 11u);
    saw21 |= r.op_id == 21;
  }
  EXPECT_TRUE(saw21);
  std::printf("[cupti] %zu records, stats: buffers=%llu records=%llu dropped=%llu kernels=%llu "
              "memcpys=%llu memsets=%llu memory=%llu external=%llu api=%llu unattributed=%llu "
              "not enabled: %s overhead %lld ns\n",
              recs.size(), (unsigned long long)prof->stats().buffers,
              (unsigned long long)prof->stats().records, (unsigned long long)prof->stats().dropped,
              (unsigned long long)prof->stats().decode.kernels,
              (unsigned long long)prof->stats().decode.memcpys,
              (unsigned long long)prof->stats().decode.memsets,
              (unsigned long long)prof->stats().decode.memory,
              (unsigned long long)prof->stats().decode.external,
              (unsigned long long)prof->stats().decode.api,
              (unsigned long long)prof->stats().decode.unattributed,
              prof->stats().kinds_not_enabled.c_str(), (long long)prof->overhead_ns());
  for (const OpRecord& r : recs)
    std::printf("[cupti]   %lld..%lld stream=%d op_id=%llu op=%s flops=%llu bytes=%llu %s\n",
                (long long)r.start_ns, (long long)r.end_ns, static_cast<int>(r.stream),
                (unsigned long long)r.op_id, r.op.c_str(), (unsigned long long)r.flops,
                (unsigned long long)r.bytes, r.name.c_str());
  prof.reset();
  if (!keep && !::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

// The profiler made through the library's C entry point works on the backend it was given.
TEST(GpuProfiler, CreatedThroughTheEntryPoint) {
  REMAT_REQUIRE_GPU();
  Dual d(std::size_t{64} << 20);
  SteadyClock clock;
  char err[1024] = {0};
  std::unique_ptr<Profiler> p(remat_cuda_profiler_create(d.gpu.get(), &clock, err, sizeof err));
  ASSERT_TRUE(p) << err;
  Both x = d.random(DType::F32, 4096, -1.0f, 1.0f, 3);
  Tensor y = d.gpu_alloc(DType::F32, 4096);
  OpInfo o = op(5, "h0.mlp.gelu", "mlp.gelu", 0, Phase::Forward, 1);
  p->begin_op(o);
  d.gpu->gelu_fwd(x.g, y, 4096);
  p->end_op(o);
  d.gpu->synchronize();
  bool found = false;
  for (const OpRecord& r : p->collect()) found |= r.op_id == 5;
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace remat::gputest
