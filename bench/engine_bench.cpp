// Step times on this machine, and how close our GEMM path gets to OpenBLAS's own sgemm (every
// GEMM shape of a step: gemm_shapes_bench).
// Usage: engine_bench [repeats] [steps|gemm|startup|walk ...]   (prints one line per figure;
// without sections, all of them)
//        engine_bench ops [repeats]   the element-wise and norm ops of a gpt2-124m step with the
//        scalar reference and each SIMD kernel set, and memory bandwidth (copy, triad), one run
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_common.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_dnnl.h"
#include "core/backend/cpu/cpu_simd.h"
#include "core/engine/model_state.h"
#include "core/engine/run.h"
#include "core/engine/weight_init.h"
#include "core/engine/simulator.h"
#include "core/model/model_source.h"
#include "core/profiler/host_profiler.h"
#include "core/schedule/schedule.h"

using namespace remat;

namespace {

double step_ms(const ModelConfig& m, int steps) { return bench::train_none(m, steps).median_step_ms(); }

// CPU time of the whole process (every thread), ms.
double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

using bench::median;
using bench::time_ms;

// STREAM-like bandwidth on two threads over n floats a array: copy a = b (8 bytes an element
// moved) and triad a = b + s c (12); GB/s, the median of reps.
void bandwidth(std::int64_t n, int reps, double& copy_gbs, double& triad_gbs) {
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  auto two = [&](auto&& body) {
    std::thread t([&] { body(n / 2, n); });
    body(0, n / 2);
    t.join();
  };
  const double cp = time_ms(reps, [&] {
    two([&](std::int64_t i0, std::int64_t i1) { std::copy(b.data() + i0, b.data() + i1, a.data() + i0); });
  });
  const double tr = time_ms(reps, [&] {
    two([&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) a[i] = b[i] + 3.0f * c[i];
    });
  });
  copy_gbs = 8.0 * n / cp / 1e6;
  triad_gbs = 12.0 * n / tr / 1e6;
}

// Per-op times on gpt2-124m activations (B1 T1024: 1024 rows of 768, the MLP's 3072) and AdamW
// over n_params, the scalar reference against every SIMD set in the same run.
int op_bench(int reps) {
  const std::int64_t rows = 1024, H = 768, n = rows * H, n_params = 32 << 20;
  CpuBackend be(2);
  LogicalClock clock;
  TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
  std::vector<Tensor> owned;
  auto make = [&](DType dt, std::int64_t count) {
    Tensor t = alloc.allocate(dt, count, {});
    be.fill_zero(t);
    owned.push_back(t);
    return t;
  };
  be.set_workspace(make(DType::U8, 16 << 20));
  const DType bf = DType::BF16;
  Tensor x = make(bf, 4 * n), y = make(bf, 4 * n), r = make(bf, n), o = make(bf, n), f = make(DType::F32, 4 * n);
  Tensor mask = make(DType::U8, n), w = make(bf, H), b = make(bf, H), dw = make(bf, H), db = make(bf, H);
  be.dropout_mask(mask, DropoutKey{1, 1, 1, 1}, 0.1f, n);
  Tensor P = make(DType::F32, n_params), G = make(DType::F32, n_params), M = make(DType::F32, n_params),
         V = make(DType::F32, n_params), Pb = make(bf, n_params), Gb = make(bf, n_params);
  const std::vector<AdamSegment> segs = {{0, n_params, true}};
  AdamArgs args;
  struct Op {
    const char* name;
    double bytes;  // nominal bytes read and written per call
    std::function<void()> run;
  };
  const std::vector<Op> ops = {
      {"cast bf16->fp32 [1024x3072]", 6.0 * 4 * n, [&] { be.cast(f, x); }},
      {"cast fp32->bf16 [1024x3072]", 6.0 * 4 * n, [&] { be.cast(y, f); }},
      {"residual_fwd (dropout 0.1)", 7.0 * n, [&] { be.residual_fwd(r, x, &mask, o, 0.1f, n); }},
      {"residual_bwd (dropout 0.1)", 7.0 * n, [&] { be.residual_bwd(o, &mask, r, y, 0.1f, n, true, false); }},
      {"dropout_fwd", 5.0 * n, [&] { be.dropout_fwd(x, mask, y, 0.1f, n); }},
      {"layernorm_fwd [1024x768]", 4.0 * n, [&] { be.layernorm_fwd(x, w, b, y, rows, H, 1e-5f); }},
      {"layernorm_bwd [1024x768]", 8.0 * n, [&] { be.layernorm_bwd(x, w, r, o, dw, db, rows, H, 1e-5f, true); }},
      {"rmsnorm_fwd [1024x768]", 4.0 * n, [&] { be.rmsnorm_fwd(x, w, y, rows, H, 1e-6f, 0.0f); }},
      {"adamw fp32 (32 Mi params)", 28.0 * n_params, [&] { be.adamw(P, G, nullptr, M, V, segs, args); }},
      {"adamw bf16 + fp32 master", 28.0 * n_params, [&] { be.adamw(Pb, Gb, &P, M, V, segs, args); }},
  };
  double copy_gbs = 0, triad_gbs = 0;
  bandwidth(n_params, reps, copy_gbs, triad_gbs);
  std::printf("memory bandwidth, 2 threads, %lld floats an array: copy %.1f GB/s, triad %.1f GB/s\n",
              static_cast<long long>(n_params), copy_gbs, triad_gbs);
  const std::vector<const cpu::simd::Kernels*> sets = cpu::simd::available();
  std::printf("| op | scalar ms | GB/s |");
  for (const auto* k : sets) std::printf(" %s: x faster | GB/s |", k->name);
  std::printf("\n");
  for (const Op& op : ops) {
    cpu::simd::set_active(nullptr);
    op.run();
    const double ref = time_ms(reps, op.run);
    std::printf("| %s | %.3f | %.1f |", op.name, ref, op.bytes / ref / 1e6);
    for (const auto* k : sets) {
      cpu::simd::set_active(k);
      op.run();
      const double t = time_ms(reps, op.run);
      std::printf(" %.2f | %.1f |", ref / t, op.bytes / t / 1e6);
    }
    std::printf("\n");
  }
  for (Tensor& t : owned) alloc.free(t);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "ops") return op_bench(argc > 2 ? std::atoi(argv[2]) : 5);
  int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  auto want = [&](const char* section) {
    if (argc <= 2) return true;
    for (int i = 2; i < argc; ++i)
      if (std::string(argv[i]) == section) return true;
    return false;
  };
  ModelConfig g = resolve_model("gpt2-124m");
  g.batch = 1;
  g.seq = 128;
  if (want("steps")) {
    ModelConfig tiny = resolve_model("tiny");
    std::printf("tiny step (bf16, naive, dropout 0.1): %.1f ms (median of %d)\n", step_ms(tiny, reps), reps);
    std::printf("gpt2-124m step at batch 1, seq 128 (bf16, flash): %.1f ms (median of %d)\n", step_ms(g, reps), reps);
  }

  if (want("gemm")) {
    // The largest GEMM of that step: the head, 128 x 768 x 50304.
    const int M = 128, K = 768, N = 50304;
    CpuBackend be(2);
    LogicalClock clock;
    TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
    Tensor ws = alloc.allocate(DType::U8, static_cast<std::int64_t>(be.workspace_bytes(g)), {});
    be.set_workspace(ws);
    Tensor x = alloc.allocate(DType::BF16, static_cast<std::int64_t>(M) * K, {});
    Tensor W = alloc.allocate(DType::BF16, static_cast<std::int64_t>(N) * K, {});
    Tensor y = alloc.allocate(DType::BF16, static_cast<std::int64_t>(M) * N, {});
    be.fill_zero(x);
    be.fill_zero(W);
    double ours = time_ms(reps, [&] { be.linear_fwd(x, W, nullptr, y, M, K, N); });
    std::vector<float> a(static_cast<std::size_t>(M) * K, 0.5f), b(static_cast<std::size_t>(N) * K, 0.25f),
        c(static_cast<std::size_t>(M) * N);
    openblas_set_num_threads(2);  // OpenBLAS's own two threads (the backend uses it at one a lane)
    double raw = time_ms(reps, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f,
                  c.data(), N);
    });
    openblas_set_num_threads(1);
    double gflop = 2.0 * M * K * N / 1e9;
    std::printf("head GEMM %dx%dx%d: ours (bf16 in/out, %s) %.2f ms = %.1f GFLOP/s; "
                "cblas_sgemm fp32 (2 OpenBLAS threads) %.2f ms = %.1f GFLOP/s; ours/sgemm = %.2f\n",
                M, K, N, cpu::gemm_path_name().c_str(), ours, gflop / ours * 1e3, raw, gflop / raw * 1e3,
                raw / ours);
    for (Tensor* t : {&x, &W, &y, &ws}) alloc.free(*t);

    // A block's MLP GEMM of that step (128 x 768 -> 3072), forward and backward, bf16 against fp32.
    for (DType dt : {DType::BF16, DType::F32}) {
      const int Mf = 128, Kf = 768, Nf = 3072;
      Tensor w2 = alloc.allocate(DType::U8, static_cast<std::int64_t>(be.workspace_bytes(g)), {});
      be.set_workspace(w2);
      Tensor xf = alloc.allocate(dt, static_cast<std::int64_t>(Mf) * Kf, {});
      Tensor Wf = alloc.allocate(dt, static_cast<std::int64_t>(Nf) * Kf, {});
      Tensor bf = alloc.allocate(dt, Nf, {});
      Tensor yf = alloc.allocate(dt, static_cast<std::int64_t>(Mf) * Nf, {});
      Tensor dWf = alloc.allocate(dt, static_cast<std::int64_t>(Nf) * Kf, {});
      Tensor dbf = alloc.allocate(dt, Nf, {});
      Tensor dxf = alloc.allocate(dt, static_cast<std::int64_t>(Mf) * Kf, {});
      for (Tensor* t : {&xf, &Wf, &bf, &yf, &dWf, &dbf, &dxf}) be.fill_zero(*t);
      const double f = time_ms(reps, [&] { be.linear_fwd(xf, Wf, &bf, yf, Mf, Kf, Nf); });
      const double b = time_ms(reps, [&] { be.linear_bwd(xf, Wf, yf, &dxf, dWf, &dbf, Mf, Kf, Nf, false); });
      const double fl = 2.0 * Mf * Kf * Nf / 1e9;
      std::printf("linear %dx%dx%d %s: forward %.2f ms = %.1f GFLOP/s, backward %.2f ms = %.1f GFLOP/s\n",
                  Mf, Kf, Nf, to_string(dt), f, fl / f * 1e3, b, 2 * fl / b * 1e3);
      for (Tensor* t : {&xf, &Wf, &bf, &yf, &dWf, &dbf, &dxf, &w2}) alloc.free(*t);
    }

  }

  // Start-up of that model: its memory allocated (ModelState, nothing written), then the initial
  // weights (the first touch of the fp32 master and bf16 parameters), the same again into the
  // touched memory (the values' own cost), against the one-thread reference definition. Wall and CPU time
  // (all threads): on a busy machine the wall time of the parallel parts is the load's.
  if (want("startup")) {
    CpuBackend be2(2);
    LogicalClock clock2;
    TrackingAllocator a2(be2.memory(Space::Device), be2.memory(Space::Host), clock2);
    const double c0 = cpu_ms();
    auto t0 = std::chrono::steady_clock::now();
    ModelState st(g, be2, a2);
    const double c1 = cpu_ms();
    auto t1 = std::chrono::steady_clock::now();
    st.init_weights(1);
    const double c2 = cpu_ms();
    auto t2 = std::chrono::steady_clock::now();
    st.init_weights(1);  // again, into memory already touched: the values without page faults
    const double c3 = cpu_ms();
    auto t3 = std::chrono::steady_clock::now();
    std::vector<float> ref = reference_weight_values(st.layout(), g.layers, 1);
    const double c4 = cpu_ms();
    auto t4 = std::chrono::steady_clock::now();
    using ms = std::chrono::duration<double, std::milli>;
    std::printf("gpt2-124m start-up (bf16, 2 threads), wall / CPU ms: memory %.1f / %.1f, "
                "initial weights %.1f / %.1f, the same again into touched memory %.1f / %.1f; "
                "the one-thread reference weights alone %.1f / %.1f\n",
                ms(t1 - t0).count(), c1 - c0, ms(t2 - t1).count(), c2 - c1, ms(t3 - t2).count(),
                c3 - c2, ms(t4 - t3).count(), c4 - c3);
  }

  // The host side of a step without its arithmetic: the executor's walk over the null backend
  // (allocator bookkeeping, events, the schedule), for the GPU benchmark's step. On CUDA the
  // kernels' launches come on top; the GPU keeps ahead only while this stays below its step.
  if (!want("walk")) return 0;
  ModelConfig big = resolve_model("gpt2-124m");
  big.attention = AttentionImpl::Flash;
  for (const char* name : {"none", "uniform"}) {
    Schedule sched = store_all_schedule(big.layers);
    if (std::string(name) != "none") {  // a checkpoint per block, one recompute per block
      const int L = big.layers;
      sched = Schedule{};
      sched.blocks = L;
      for (int b = 0; b < L; ++b) sched.forward(b, b < L - 1 ? Keep::input() : Keep::all());
      for (int b = L - 1; b >= 0; --b) {
        if (b < L - 1) sched.recompute(b, Keep::all());
        sched.backward(b);
      }
    }
    std::size_t events = 0;
    const double walk = time_ms(reps, [&] { events = simulate(big, sched, nullptr).events; });
    std::printf("host walk of one gpt2-124m B%d T%d flash step, %s%s (null backend): %.2f ms, "
                "%zu memory events\n",
                big.batch, big.seq, name, std::string(name) == "none" ? "" : " segments=L", walk,
                events);
  }
  return 0;
}
