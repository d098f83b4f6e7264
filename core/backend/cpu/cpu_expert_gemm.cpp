// The experts' projections (ExpertLinear) on the CPU: one GEMM an expert over its rows, grouped
// over the pool's lanes. An expert with at least 1/lanes of the layer's rows splits its GEMM over
// every lane as any Linear does; the others, many and small under uneven routing, each run whole
// on one lane, the lanes taking them largest first (each to the lane with the fewest rows so far),
// each lane with its own part of the workspace. An expert's bits depend on its rows, its shapes
// and the lane count only: a lane runs the whole expert as one GEMM call, the call a split would
// cut into columns. Where the lanes' parts do not fit in the workspace (sized for one expert of
// every token, so the prediction is the same whatever the routing), the small experts run one
// after another as the large ones do.
#include <algorithm>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_common.h"
#include "core/backend/cpu/cpu_gemm_parts.h"

namespace remat {

namespace {

// Expert e's slices of an ExpertLinear's tensors: its rows [s, s + n) of x and y (dy, dx), its
// weights and biases (their gradients).
struct ExpertSlices {
  Tensor x, W, b, y, dx, dW, db;
  ExpertSlices(const OpArgs& a, bool bwd, int e, std::int64_t s, std::int64_t n) {
    const std::int64_t K = a.K, N = a.N, NK = N * K;
    x = a.in[0]->slice(s * K, n * K);
    W = a.w->slice(e * NK, NK);
    if (a.b) b = a.b->slice(e * N, N);
    if (!bwd) {
      y = a.out[0]->slice(s * N, n * N);
      return;
    }
    y = a.dout[0]->slice(s * N, n * N);
    if (a.din[0] && *a.din[0]) dx = a.din[0]->slice(s * K, n * K);
    dW = a.dw->slice(e * NK, NK);
    if (a.db) db = a.db->slice(e * N, N);
  }
};

}  // namespace

void CpuBackend::expert_gemms(const OpArgs& a, Pass pass, const std::vector<std::int64_t>& start,
                              const std::vector<std::int64_t>& rows) {
  const bool bwd = pass == Pass::Backward;
  const char* op = bwd ? "expert_linear_bwd" : "expert_linear_fwd";
  const int E = a.moe.experts, lanes = threads_;
  auto run = [&](const cpu::Lanes& on, cpu::Arena& ws, int e) {
    const ExpertSlices t(a, bwd, e, start[e], rows[e]);
    if (!bwd)
      linear_fwd(on, ws, t.x, t.W, a.b ? &t.b : nullptr, t.y, rows[e], a.K, a.N);
    else
      linear_bwd(on, ws, t.x, t.W, t.y, t.dx ? &t.dx : nullptr, t.dW, a.db ? &t.db : nullptr, rows[e], a.K, a.N,
                 a.acc[0]);
  };
  auto on_every_lane = [&](int e) {
    cpu::Arena ws(ws_, op);
    run(cpu::Lanes{pool_.get(), lanes}, ws, e);
  };
  std::int64_t total = 0;
  for (int e = 0; e < E; ++e) total += rows[e];
  std::vector<int> small;
  for (int e = 0; e < E; ++e)
    if (rows[e] > 0 && rows[e] * lanes < total) small.push_back(e);
  // Largest first, then by index; each to the lane with the fewest rows (the lowest among equals).
  std::stable_sort(small.begin(), small.end(), [&](int x, int y) { return rows[x] > rows[y]; });
  std::vector<std::vector<int>> lane(static_cast<std::size_t>(lanes));
  std::vector<std::int64_t> load(static_cast<std::size_t>(lanes), 0);
  std::vector<std::uint64_t> need(static_cast<std::size_t>(lanes), 0);
  for (int e : small) {
    const auto p = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    lane[p].push_back(e);
    load[p] += rows[e];
    const ExpertSlices t(a, bwd, e, start[e], rows[e]);
    need[p] = std::max(need[p], linear_ws(pass, t.x, t.W, t.y, t.dx ? &t.dx : nullptr, bwd ? &t.dW : nullptr,
                                          rows[e], a.K, a.N));
  }
  std::uint64_t sum = 0;
  std::vector<std::uint64_t> offset(static_cast<std::size_t>(lanes), 0);
  for (int p = 0; p < lanes; ++p) offset[p] = sum, sum += need[p];
  const bool grouped = lanes > 1 && small.size() >= 2 && sum <= ws_.bytes();
  experts_on_one_lane_ = grouped ? static_cast<int>(small.size()) : 0;
  std::vector<bool> on_one_lane(static_cast<std::size_t>(E), false);
  if (grouped)
    for (int e : small) on_one_lane[static_cast<std::size_t>(e)] = true;
  for (int e = 0; e < E; ++e)
    if (rows[e] > 0 && !on_one_lane[static_cast<std::size_t>(e)]) on_every_lane(e);
  if (!grouped) return;
  char* base = static_cast<char*>(ws_.data);
  cpu::parallel_for(*pool_, lanes, 1, [&](std::int64_t p0, std::int64_t p1, int) {
    for (std::int64_t p = p0; p < p1; ++p)
      for (int e : lane[static_cast<std::size_t>(p)]) {
        cpu::Arena ws(base + offset[static_cast<std::size_t>(p)], need[static_cast<std::size_t>(p)], op);
        run(cpu::Lanes{}, ws, e);
      }
  });
}

}  // namespace remat
