// Step times on this machine, and how close our GEMM path gets to OpenBLAS's own sgemm.
// Usage: engine_bench [repeats] [steps|gemm|startup|walk ...]   (prints one line per figure;
// without sections, all of them)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/engine/model_state.h"
#include "core/engine/run.h"
#include "core/engine/weight_init.h"
#include "core/engine/simulator.h"
#include "core/model/model_source.h"
#include "core/profiler/host_profiler.h"
#include "core/schedule/schedule.h"

using namespace remat;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double step_ms(const ModelConfig& m, int steps) {
  CpuBackend be(2);
  SteadyClock clock;
  RunSpec spec;
  spec.model = m;
  spec.schedule = store_all_schedule(m.layers);
  spec.steps = steps;
  spec.warmup = 1;
  Trace t = run_training(spec, be, nullptr, clock);
  return t.median_step_ms();
}

// CPU time of the whole process (every thread), ms.
double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

template <class F>
double time_ms(int reps, F&& f) {
  std::vector<double> v;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    v.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(v);
}

}  // namespace

int main(int argc, char** argv) {
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
    std::printf("head GEMM %dx%dx%d: ours (bf16 in/out, fp32 staging) %.2f ms = %.1f GFLOP/s; "
                "cblas_sgemm fp32 (2 OpenBLAS threads) %.2f ms = %.1f GFLOP/s; ours/sgemm = %.2f\n",
                M, K, N, ours, gflop / ours * 1e3, raw, gflop / raw * 1e3, raw / ours);
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

  // Start-up of that model: its memory allocated and zeroed (ModelState), then the initial
  // weights, against the one-thread reference definition of the weights. Wall and CPU time
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
    std::vector<float> ref = reference_weight_values(st.layout(), g.layers, 1);
    const double c3 = cpu_ms();
    auto t3 = std::chrono::steady_clock::now();
    using ms = std::chrono::duration<double, std::milli>;
    std::printf("gpt2-124m start-up (bf16, 2 threads), wall / CPU ms: memory and zeroing %.1f / %.1f, "
                "initial weights %.1f / %.1f; the one-thread reference weights alone %.1f / %.1f\n",
                ms(t1 - t0).count(), c1 - c0, ms(t2 - t1).count(), c2 - c1, ms(t3 - t2).count(),
                c3 - c2);
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
