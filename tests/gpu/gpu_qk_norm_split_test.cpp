// QK-norm split over tensor-parallel ranks on CUDA (CudaBackend::qk_norm_sums, qk_norm_split):
// each rank's sums and split against the CPU backend's on the same inputs; two ranks' sums added
// (what the all-reduce does) and split against the whole-row QkNorm op on the GPU; the same bits
// on a second run; the refusals. Outputs are poisoned (0xFF) first; relative L2 error <= 1e-2
// (bf16) or 1e-5 (fp32).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/util/error.h"
#include "tests/gpu/gpu_test_util.h"

namespace remat::gputest {
namespace {

constexpr int kT = 2;
constexpr float kEps = 1e-6f;

// Whole widths of the q part and of the k (and v) part: vector widths on a rank, and not.
struct Dims {
  int q, kv;
  int rq() const { return q / kT; }
  int rkv() const { return kv / kT; }
  int rw() const { return rq() + 2 * rkv(); }
  int w() const { return q + 2 * kv; }
};
constexpr Dims kDims[] = {{128, 64}, {52, 26}};

// Rank t's columns of whole qkv rows: its q heads, its k heads, its v heads.
std::vector<float> rank_rows(const std::vector<float>& whole, Dims dm, std::int64_t rows, int t) {
  std::vector<float> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = whole.data() + r * dm.w();
    for (int base : {0, dm.q, dm.q + dm.kv}) {
      const int n = base == 0 ? dm.rq() : dm.rkv();
      out.insert(out.end(), row + base + t * n, row + base + (t + 1) * n);
    }
  }
  return out;
}

std::vector<float> slice(const std::vector<float>& v, int t, int n) {
  return std::vector<float>(v.begin() + t * n, v.begin() + (t + 1) * n);
}

// Column j of rows of `per_row` values.
std::vector<float> column(const std::vector<float>& v, std::size_t per_row, std::size_t j) {
  std::vector<float> out;
  for (std::size_t i = j; i < v.size(); i += per_row) out.push_back(v[i]);
  return out;
}

// Whole-row values: inputs, and the gradients' start (dx when acc; dw and db always add).
struct Whole {
  std::vector<float> x, wq, wk, dy, dx0, dwq0, dwk0;
};

Whole make_whole(Dims dm, std::int64_t rows, std::uint64_t seed) {
  const std::int64_t n = rows * dm.w();
  Whole w;
  w.x = uniform(n, -2.0f, 2.0f, seed);
  w.wq = uniform(dm.q, 0.5f, 1.5f, seed + 1);
  w.wk = uniform(dm.kv, 0.5f, 1.5f, seed + 2);
  w.dy = uniform(n, -1.0f, 1.0f, seed + 3);
  w.dx0 = uniform(n, -1.0f, 1.0f, seed + 4);
  w.dwq0 = uniform(dm.q, -0.1f, 0.1f, seed + 5);
  w.dwk0 = uniform(dm.kv, -0.1f, 0.1f, seed + 6);
  return w;
}

// One rank's tensors on both backends. y and (without acc) dx poisoned, sums poisoned.
struct Rank {
  Both x, wq, wk, dy, y, dx, dwq, dwk, sums;
  std::int64_t rows = 0;
  int K = 0, N = 0;
  bool acc = false;
  OpArgs args(bool cpu) const {
    auto t = [cpu](const Both& b) { return cpu ? &b.c : &b.g; };
    OpArgs a;
    a.in[0] = t(x), a.out[0] = t(y), a.w = t(wq), a.b = t(wk);
    a.dout[0] = t(dy), a.din[0] = t(dx), a.dw = t(dwq), a.db = t(dwk), a.acc[0] = acc;
    a.M = rows, a.K = K, a.N = N, a.eps = kEps;
    return a;
  }
};

Rank make_rank(Dual& d, DType dt, const Whole& w, Dims dm, std::int64_t rows, int t, Pass pass,
               bool acc) {
  Rank r;
  r.rows = rows, r.K = dm.rq(), r.N = dm.rkv(), r.acc = acc;
  const std::int64_t n = rows * dm.rw();
  r.x = d.upload(dt, rank_rows(w.x, dm, rows, t));
  r.wq = d.upload(dt, slice(w.wq, t, dm.rq()));
  r.wk = d.upload(dt, slice(w.wk, t, dm.rkv()));
  r.dy = d.upload(dt, rank_rows(w.dy, dm, rows, t));
  r.y = d.poisoned(dt, n);
  r.dx = acc ? d.upload(dt, rank_rows(w.dx0, dm, rows, t)) : d.poisoned(dt, n);
  r.dwq = d.upload(dt, slice(w.dwq0, t, dm.rq()));
  r.dwk = d.upload(dt, slice(w.dwk0, t, dm.rkv()));
  r.sums = d.poisoned(DType::F32, rows * (pass == Pass::Forward ? 2 : 4));
  return r;
}

// The all-reduce: every rank's sums (on both backends) become the total of `parts`, in rank order.
void write_total(Dual& d, std::vector<Rank>& ranks, const std::vector<std::vector<float>>& parts) {
  std::vector<float> total(parts[0].size(), 0.0f);
  for (const std::vector<float>& p : parts)
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += p[i];
  const std::vector<std::uint8_t> bytes = to_bytes(DType::F32, total);
  for (Rank& r : ranks) {
    d.cpu.write_bytes(r.sums.c, bytes.data());
    d.gpu->write_bytes(r.sums.g, bytes.data());
  }
}

std::string pass_name(Pass p, bool acc) {
  return p == Pass::Forward ? "fwd" : acc ? "bwd acc" : "bwd";
}

class GpuQkNormSplit : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    REMAT_REQUIRE_GPU();
    d = std::make_unique<Dual>();
    dt = GetParam();
  }
  std::unique_ptr<Dual> d;
  DType dt = DType::F32;
};

std::string dtype_name(const ::testing::TestParamInfo<DType>& i) {
  return i.param == DType::BF16 ? "bf16" : "fp32";
}

// Each rank's sums from both backends, then the split of the CPU's totals on both.
TEST_P(GpuQkNormSplit, CudaMatchesCpu) {
  const std::int64_t rows = 45;
  for (Dims dm : kDims)
  for (auto [pass, acc] : {std::pair{Pass::Forward, false}, std::pair{Pass::Backward, false},
                           std::pair{Pass::Backward, true}}) {
    const std::string what = pass_name(pass, acc) + " q=" + std::to_string(dm.q);
    const Whole w = make_whole(dm, rows, 100 + dm.q);
    const std::size_t per_row = pass == Pass::Forward ? 2 : 4;
    std::vector<Rank> ranks;
    for (int t = 0; t < kT; ++t) ranks.push_back(make_rank(*d, dt, w, dm, rows, t, pass, acc));
    std::vector<std::vector<float>> parts;
    for (Rank& r : ranks) {
      d->cpu.qk_norm_sums(pass, r.args(true), r.sums.c);
      d->gpu->qk_norm_sums(pass, r.args(false), r.sums.g);
      const std::vector<float> c = d->cpu_read(r.sums), g = d->gpu_read(r.sums);
      for (std::size_t j = 0; j < per_row; ++j)
        EXPECT_LE(rel_l2(column(g, per_row, j), column(c, per_row, j)), tol(dt))
            << "qk_norm_sums " << what << " sum " << j;
      parts.push_back(c);
    }
    write_total(*d, ranks, parts);
    for (Rank& r : ranks) {
      d->cpu.qk_norm_split(pass, r.args(true), r.sums.c, dm.q, dm.kv);
      d->gpu->qk_norm_split(pass, r.args(false), r.sums.g, dm.q, dm.kv);
      if (pass == Pass::Forward) {
        EXPECT_LE(d->rel(r.y), tol(dt)) << "qk_norm_split " << what;
        continue;
      }
      EXPECT_LE(d->rel(r.dx), tol(dt)) << "qk_norm_split dx " << what;
      EXPECT_LE(d->rel(r.dwq), tol(dt)) << "qk_norm_split dwq " << what;
      EXPECT_LE(d->rel(r.dwk), tol(dt)) << "qk_norm_split dwk " << what;
    }
  }
}

// The whole-row QkNorm op on the GPU: y, and dx, dwq, dwk from the gradients' start.
struct WholeOut {
  std::vector<float> y, dx, dwq, dwk;
};

WholeOut whole_op(Dual& d, DType dt, const Whole& w, Dims dm, std::int64_t rows, bool acc) {
  const std::int64_t n = rows * dm.w();
  Both x = d.upload(dt, w.x), wq = d.upload(dt, w.wq), wk = d.upload(dt, w.wk);
  Both dy = d.upload(dt, w.dy), y = d.poisoned(dt, n);
  Both dx = acc ? d.upload(dt, w.dx0) : d.poisoned(dt, n);
  Both dwq = d.upload(dt, w.dwq0), dwk = d.upload(dt, w.dwk0);
  OpArgs a;
  a.in[0] = &x.g, a.out[0] = &y.g, a.w = &wq.g, a.b = &wk.g;
  a.dout[0] = &dy.g, a.din[0] = &dx.g, a.dw = &dwq.g, a.db = &dwk.g, a.acc[0] = acc;
  a.M = rows, a.K = dm.q, a.N = dm.kv, a.eps = kEps;
  d.gpu->run(OpKind::QkNorm, Pass::Forward, a);
  d.gpu->run(OpKind::QkNorm, Pass::Backward, a);
  return {d.gpu_read(y), d.gpu_read(dx), d.gpu_read(dwq), d.gpu_read(dwk)};
}

// Two ranks' CUDA sums added, then split: every rank's slice of the whole op's results. 333 rows
// take several row chunks in the weight gradients and a partial block of rows.
TEST_P(GpuQkNormSplit, SummedRanksGiveTheWholeOp) {
  for (std::int64_t rows : {std::int64_t{45}, std::int64_t{333}})
  for (Dims dm : kDims)
  for (auto [pass, acc] : {std::pair{Pass::Forward, false}, std::pair{Pass::Backward, false},
                           std::pair{Pass::Backward, true}}) {
    const std::string what =
        pass_name(pass, acc) + " q=" + std::to_string(dm.q) + " rows=" + std::to_string(rows);
    const Whole w = make_whole(dm, rows, 200 + dm.q);
    const WholeOut want = whole_op(*d, dt, w, dm, rows, acc);
    std::vector<Rank> ranks;
    for (int t = 0; t < kT; ++t) ranks.push_back(make_rank(*d, dt, w, dm, rows, t, pass, acc));
    std::vector<std::vector<float>> parts;
    for (Rank& r : ranks) {
      d->gpu->qk_norm_sums(pass, r.args(false), r.sums.g);
      parts.push_back(d->gpu_read(r.sums));
    }
    write_total(*d, ranks, parts);
    for (int t = 0; t < kT; ++t) {
      Rank& r = ranks[static_cast<std::size_t>(t)];
      d->gpu->qk_norm_split(pass, r.args(false), r.sums.g, dm.q, dm.kv);
      if (pass == Pass::Forward) {
        EXPECT_LE(rel_l2(d->gpu_read(r.y), rank_rows(want.y, dm, rows, t)), tol(dt))
            << "y " << what << " rank " << t;
        continue;
      }
      EXPECT_LE(rel_l2(d->gpu_read(r.dx), rank_rows(want.dx, dm, rows, t)), tol(dt))
          << "dx " << what << " rank " << t;
      EXPECT_LE(rel_l2(d->gpu_read(r.dwq), slice(want.dwq, t, dm.rq())), tol(dt))
          << "dwq " << what << " rank " << t;
      EXPECT_LE(rel_l2(d->gpu_read(r.dwk), slice(want.dwk, t, dm.rkv())), tol(dt))
          << "dwk " << what << " rank " << t;
    }
  }
}

// The sums and both passes of the split twice from the same start: the same bytes.
TEST_P(GpuQkNormSplit, SameBitsOnASecondRun) {
  const std::int64_t rows = 333;
  const Dims dm = kDims[0];
  const Whole w = make_whole(dm, rows, 300);
  std::vector<std::vector<std::uint8_t>> out[2];
  for (int run = 0; run < 2; ++run)
    for (Pass pass : {Pass::Forward, Pass::Backward}) {
      Rank r = make_rank(*d, dt, w, dm, rows, 0, pass, false);
      d->gpu->qk_norm_sums(pass, r.args(false), r.sums.g);
      out[run].push_back(d->gpu_bytes(r.sums.g));
      d->gpu->qk_norm_split(pass, r.args(false), r.sums.g, dm.q, dm.kv);
      if (pass == Pass::Forward) {
        out[run].push_back(d->gpu_bytes(r.y.g));
      } else {
        for (const Both* b : {&r.dx, &r.dwq, &r.dwk}) out[run].push_back(d->gpu_bytes(b->g));
      }
    }
  ASSERT_EQ(out[0].size(), out[1].size());
  const char* names[] = {"sums fwd", "y", "sums bwd", "dx", "dwq", "dwk"};
  for (std::size_t i = 0; i < out[0].size(); ++i)
    EXPECT_TRUE(out[0][i] == out[1][i]) << names[i] << " differs on the second run";
}

// Whole widths below the rank's, short or non-fp32 sums and mixed dtypes are refused by name,
// before anything runs.
TEST_P(GpuQkNormSplit, RefusesBadArguments) {
  const std::int64_t rows = 45;
  const Dims dm = kDims[0];
  const Whole w = make_whole(dm, rows, 400);
  Rank fwd = make_rank(*d, dt, w, dm, rows, 0, Pass::Forward, false);
  Rank bwd = make_rank(*d, dt, w, dm, rows, 0, Pass::Backward, false);
  auto refuses = [](const char* what, const char* op, const std::string& word, auto&& call) {
    try {
      call();
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(std::string("cuda ") + op + ":", 0), 0u) << what << ": " << msg;
      EXPECT_NE(msg.find(word), std::string::npos) << what << ": " << msg;
    }
  };
  refuses("q width below the rank's K", "qk_norm_split_fwd", std::to_string(dm.rq() - 1), [&] {
    d->gpu->qk_norm_split(Pass::Forward, fwd.args(false), fwd.sums.g, dm.rq() - 1, dm.kv);
  });
  refuses("k width below the rank's N", "qk_norm_split_bwd", std::to_string(dm.rkv() - 1), [&] {
    d->gpu->qk_norm_split(Pass::Backward, bwd.args(false), bwd.sums.g, dm.q, dm.rkv() - 1);
  });
  refuses("two sums a row to the backward", "qk_norm_split_bwd", "row sums", [&] {
    d->gpu->qk_norm_split(Pass::Backward, bwd.args(false), fwd.sums.g, dm.q, dm.kv);
  });
  refuses("two sums a row to the backward's sums", "qk_norm_sums_bwd", "row sums", [&] {
    d->gpu->qk_norm_sums(Pass::Backward, bwd.args(false), fwd.sums.g);
  });
  Both sums16 = d->poisoned(DType::BF16, rows * 2);
  refuses("bf16 sums", "qk_norm_sums_fwd", "row sums", [&] {
    d->gpu->qk_norm_sums(Pass::Forward, fwd.args(false), sums16.g);
  });
  Both other = d->random(dt == DType::BF16 ? DType::F32 : DType::BF16, dm.rq(), 0.5f, 1.5f, 401);
  refuses("a q weight of the other dtype", "qk_norm_split_fwd", "mixed dtypes", [&] {
    OpArgs a = fwd.args(false);
    a.w = &other.g;
    d->gpu->qk_norm_split(Pass::Forward, a, fwd.sums.g, dm.q, dm.kv);
  });
  // The refusals left the outputs unwritten.
  for (float v : d->gpu_read(fwd.y)) ASSERT_TRUE(std::isnan(v)) << "y written by a refused call";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuQkNormSplit, ::testing::Values(DType::F32, DType::BF16),
                         dtype_name);

}  // namespace
}  // namespace remat::gputest
