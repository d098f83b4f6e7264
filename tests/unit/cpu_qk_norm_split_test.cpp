// QK-norm split over tensor-parallel ranks (Backend::qk_norm_sums, qk_norm_split): each rank
// holds its heads' columns of q, k and v and its slices of the two norm weights; with the ranks'
// partial row sums added (what the all-reduce does), every rank's output, input gradient and
// weight gradients are its slices of the one-rank QkNorm op's, to fp32 rounding.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/cpu_test_util.h"

namespace remat {
namespace {

using cputest::Env;
using cputest::randv;

constexpr int kRows = 5, kHeads = 4, kKvHeads = 2, kD = 3, kT = 2;
constexpr int kQ = kHeads * kD, kKv = kKvHeads * kD, kW = kQ + 2 * kKv;
constexpr int kRq = kQ / kT, kRkv = kKv / kT, kRw = kRq + 2 * kRkv;
constexpr float kEps = 1e-6f;

// Rank t's columns of a whole qkv row: its q heads, its k heads, its v heads.
std::vector<float> rank_rows(const std::vector<float>& whole, int t) {
  std::vector<float> out;
  for (int r = 0; r < kRows; ++r) {
    const float* row = whole.data() + r * kW;
    out.insert(out.end(), row + t * kRq, row + (t + 1) * kRq);
    out.insert(out.end(), row + kQ + t * kRkv, row + kQ + (t + 1) * kRkv);
    out.insert(out.end(), row + kQ + kKv + t * kRkv, row + kQ + kKv + (t + 1) * kRkv);
  }
  return out;
}

std::vector<float> slice(const std::vector<float>& v, int t, int n) {
  return std::vector<float>(v.begin() + t * n, v.begin() + (t + 1) * n);
}

void expect_close(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                  double tol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << " [" << i << "]";
}

struct Whole {
  std::vector<float> x, wq, wk, dy, y, dx, dwq, dwk;
};

// The one-rank op: forward, then backward with dx written (not accumulated).
Whole whole_op(Env& e) {
  Whole w;
  w.x = randv(kRows * kW, 11, -2, 2);
  w.wq = randv(kQ, 12, 0.5f, 1.5f);
  w.wk = randv(kKv, 13, 0.5f, 1.5f);
  w.dy = randv(kRows * kW, 14);
  Tensor x = e.from(w.x), wq = e.from(w.wq), wk = e.from(w.wk), dy = e.from(w.dy);
  Tensor y = e.make(DType::F32, kRows * kW), dx = e.make(DType::F32, kRows * kW);
  Tensor dwq = e.make(DType::F32, kQ), dwk = e.make(DType::F32, kKv);
  OpArgs a;
  a.in[0] = &x, a.out[0] = &y, a.w = &wq, a.b = &wk, a.M = kRows, a.K = kQ, a.N = kKv, a.eps = kEps;
  e.be.run(OpKind::QkNorm, Pass::Forward, a);
  a.dout[0] = &dy, a.din[0] = &dx, a.dw = &dwq, a.db = &dwk;
  e.be.run(OpKind::QkNorm, Pass::Backward, a);
  w.y = e.get(y), w.dx = e.get(dx), w.dwq = e.get(dwq), w.dwk = e.get(dwk);
  return w;
}

struct Rank {
  Tensor x, wq, wk, dy, y, dx, dwq, dwk, sums;
  bool acc = false;
  OpArgs args() const {
    OpArgs a;
    a.in[0] = &x, a.out[0] = &y, a.w = &wq, a.b = &wk;
    a.dout[0] = &dy, a.din[0] = &dx, a.dw = &dwq, a.db = &dwk, a.acc[0] = acc;
    a.M = kRows, a.K = kRq, a.N = kRkv, a.eps = kEps;
    return a;
  }
};

Rank make_rank(Env& e, const Whole& w, int t, int sums_per_row) {
  Rank r;
  r.x = e.from(rank_rows(w.x, t));
  r.wq = e.from(slice(w.wq, t, kRq));
  r.wk = e.from(slice(w.wk, t, kRkv));
  r.dy = e.from(rank_rows(w.dy, t));
  r.y = e.make(DType::F32, kRows * kRw);
  r.dx = e.make(DType::F32, kRows * kRw);
  r.dwq = e.make(DType::F32, kRq);
  r.dwk = e.make(DType::F32, kRkv);
  r.sums = e.make(DType::F32, kRows * sums_per_row);
  return r;
}

// The all-reduce: every rank's sums become the total over the ranks.
void sum_over_ranks(Env& e, std::vector<Rank>& ranks) {
  std::vector<float> total(static_cast<std::size_t>(ranks[0].sums.numel), 0.0f);
  for (Rank& r : ranks) {
    const std::vector<float> part = e.get(r.sums);
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += part[i];
  }
  for (Rank& r : ranks) e.set(r.sums, total);
}

TEST(CpuQkNormSplit, ForwardIsTheWholeOpsSlice) {
  Env e;
  const Whole w = whole_op(e);
  std::vector<Rank> ranks;
  for (int t = 0; t < kT; ++t) ranks.push_back(make_rank(e, w, t, 2));
  for (Rank& r : ranks) e.be.qk_norm_sums(Pass::Forward, r.args(), r.sums);
  sum_over_ranks(e, ranks);
  for (int t = 0; t < kT; ++t) {
    e.be.qk_norm_split(Pass::Forward, ranks[t].args(), ranks[t].sums, kQ, kKv);
    expect_close("y", e.get(ranks[t].y), rank_rows(w.y, t), 1e-6);
  }
  // The rank's own widths give its heads' statistic, not the whole projection's: other values.
  Rank& r = ranks[0];
  e.be.qk_norm_sums(Pass::Forward, r.args(), r.sums);
  e.be.qk_norm_split(Pass::Forward, r.args(), r.sums, kRq, kRkv);
  const std::vector<float> local = e.get(r.y), want = rank_rows(w.y, 0);
  double worst = 0;
  for (std::size_t i = 0; i < local.size(); ++i) worst = std::max(worst, std::fabs(double(local[i]) - want[i]));
  EXPECT_GT(worst, 1e-3) << "a rank's own rows' statistic would pass for the whole width's";
}

TEST(CpuQkNormSplit, BackwardIsTheWholeOpsSlice) {
  Env e;
  const Whole w = whole_op(e);
  std::vector<Rank> ranks;
  for (int t = 0; t < kT; ++t) ranks.push_back(make_rank(e, w, t, 4));
  for (Rank& r : ranks) e.be.qk_norm_sums(Pass::Backward, r.args(), r.sums);
  sum_over_ranks(e, ranks);
  for (int t = 0; t < kT; ++t) {
    Rank& r = ranks[t];
    e.be.qk_norm_split(Pass::Backward, r.args(), r.sums, kQ, kKv);
    expect_close("dx", e.get(r.dx), rank_rows(w.dx, t), 1e-5);
    expect_close("dwq", e.get(r.dwq), slice(w.dwq, t, kRq), 1e-5);
    expect_close("dwk", e.get(r.dwk), slice(w.dwk, t, kRkv), 1e-5);
    // Again with acc: dx is added into, the weights' gradients accumulate.
    r.acc = true;
    e.be.qk_norm_split(Pass::Backward, r.args(), r.sums, kQ, kKv);
    std::vector<float> twice = rank_rows(w.dx, t), dwq2 = slice(w.dwq, t, kRq);
    for (float& v : twice) v *= 2;
    for (float& v : dwq2) v *= 2;
    expect_close("dx acc", e.get(r.dx), twice, 1e-5);
    expect_close("dwq acc", e.get(r.dwq), dwq2, 1e-5);
  }
}

TEST(CpuQkNormSplit, RefusesShortSumsAndWidthsBelowTheRanks) {
  Env e;
  const Whole w = whole_op(e);
  Rank r = make_rank(e, w, 0, 2);
  auto refuses = [&](Pass pass, int qw, const char* word) {
    try {
      e.be.qk_norm_split(pass, r.args(), r.sums, qw, kKv);
      ADD_FAILURE() << "accepted: " << word;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(word), std::string::npos) << err.what();
    }
  };
  refuses(Pass::Backward, kQ, "row sums");  // the backward needs four sums a row
  refuses(Pass::Forward, kRq - 1, std::to_string(kRq - 1).c_str());
}

}  // namespace
}  // namespace remat
