// Time per op type and per kernel, over the step and over a time range, and its CSV.
#include <gtest/gtest.h>

#include "core/analysis/op_stats.h"
#include "core/trace/csv.h"
#include "test_files.h"

namespace remat {
namespace {

Trace three_types() {
  Trace t;
  auto add = [&](std::int64_t s, std::int64_t e, const char* op, const char* name, Stream st = Stream::Compute) {
    OpRecord o;
    o.start_ns = s;
    o.end_ns = e;
    o.op = op;
    o.name = name;
    o.stream = st;
    o.flops = 7;
    o.bytes = 3;
    t.ops.push_back(o);
  };
  add(0, 100, "mlp.fc", "gemm");
  add(100, 130, "mlp.fc", "gemm");
  add(130, 140, "gelu", "ew, \"gelu\"");
  add(140, 400, "attn", "gemm");
  add(150, 170, "offload", "memcpy DtoH", Stream::CopyToHost);
  t.step_start_ns = 0;
  t.step_end_ns = 500;
  return t;
}

TEST(OpStats, PerOpTypeCountsTotalsAndExtremes) {
  const Trace t = three_types();
  const auto s = op_stats(t, OpStatKey::OpType);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].key, "attn");  // longest first
  EXPECT_EQ(s[1].key, "mlp.fc");
  EXPECT_EQ(s[1].count, 2u);
  EXPECT_EQ(s[1].total_ns, 130);
  EXPECT_EQ(s[1].min_ns, 30);
  EXPECT_EQ(s[1].max_ns, 100);
  EXPECT_DOUBLE_EQ(s[1].mean_ns(), 65.0);
  EXPECT_EQ(s[1].flops, 14u);
  std::uint64_t count = 0;
  std::int64_t total = 0;
  for (const auto& x : s) {
    count += x.count;
    total += x.total_ns;
  }
  EXPECT_EQ(count, t.ops.size());
  EXPECT_EQ(total, 100 + 30 + 10 + 260 + 20);
  EXPECT_EQ(step_length_ns(t), 500);
}

TEST(OpStats, PerKernelAndInARange) {
  const Trace t = three_types();
  const auto k = op_stats(t, OpStatKey::Kernel);
  ASSERT_EQ(k.size(), 3u);
  EXPECT_EQ(k[0].key, "gemm");
  EXPECT_EQ(k[0].count, 3u);
  EXPECT_EQ(k[0].total_ns, 390);
  // [120, 135] meets the second fc and the gelu; compute only leaves out the copy.
  OpStatsFilter f;
  f.t0 = 120;
  f.t1 = 135;
  const auto r = op_stats(t, OpStatKey::OpType, f);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].key, "mlp.fc");
  EXPECT_EQ(r[0].count, 1u);
  EXPECT_EQ(r[1].key, "gelu");
  f.t0 = 145;
  f.t1 = 160;
  EXPECT_EQ(op_stats(t, OpStatKey::OpType, f).size(), 2u);
  f.compute_only = true;
  EXPECT_EQ(op_stats(t, OpStatKey::OpType, f).size(), 1u);
  f.t0 = 450;
  f.t1 = 460;
  EXPECT_TRUE(op_stats(t, OpStatKey::OpType, f).empty());
}

TEST(OpStats, CsvReadsBack) {
  const Trace t = three_types();
  const auto k = op_stats(t, OpStatKey::Kernel);
  testing::TempDir dir;
  const std::string path = (dir.path() / "kernels.csv").string();
  write_op_stats_csv(path, k, step_length_ns(t));
  csv::Reader r(path);
  const std::size_t key = r.col("key"), count = r.col("count"), total = r.col("total_us"), share = r.col("share_of_step"),
                    mn = r.col("min_us");
  std::size_t rows = 0;
  while (r.next()) {
    ASSERT_LT(rows, k.size());
    EXPECT_EQ(r.str(key), k[rows].key);
    EXPECT_EQ(r.u64(count), k[rows].count);
    EXPECT_DOUBLE_EQ(r.f64(total), static_cast<double>(k[rows].total_ns) / 1e3);
    EXPECT_DOUBLE_EQ(r.f64(mn), static_cast<double>(k[rows].min_ns) / 1e3);
    EXPECT_DOUBLE_EQ(r.f64(share), static_cast<double>(k[rows].total_ns) / 500.0);
    ++rows;
  }
  EXPECT_EQ(rows, k.size());
}

}  // namespace
}  // namespace remat
