// Our GEMM path against OpenBLAS's own sgemm on every GEMM shape of a training step, and the whole
// step's FLOP-weighted efficiency against sgemm's rate on those shapes.
// Usage: gemm_shapes_bench [repeats] [preset ...]   (presets: tiny small gpt2-124m; the last at
//        seq 128, batch 1; default all three)
//
// For each preset it times, on a 2-thread CPU backend, each GEMM-bearing op of a GPT-2 step (the
// four linear layers of a block, forward and backward, and the fused head + loss) in fp32, and in
// bf16 on each GEMM path (REMAT_GEMM openblas, dnnl), and the same GEMMs as plain fp32
// cblas_sgemm calls with OpenBLAS's own two threads. "sgemm / ours" above 1 means our op (bias,
// rounding and staging included) beats sgemm on its GEMMs. The step line: the run's counted FLOPs
// over its median step time, divided by the FLOP-weighted sgemm rate of the step's GEMMs (their
// FLOPs over the time sgemm takes for all of them); 1.0 would be a step that runs every FLOP at
// sgemm's rate with nothing else costing time.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_dnnl.h"
#include "core/engine/run.h"
#include "core/model/model_source.h"
#include "core/profiler/host_profiler.h"
#include "core/schedule/schedule.h"

using namespace remat;

namespace {

using bench::median;

// The median of `reps` timed calls after one warm call (primitives built, pages touched).
template <class F>
double time_ms(int reps, F&& f) {
  f();
  return bench::time_ms(reps, f);
}

struct Shape {
  const char* name;
  int K, N, count;  // in, out features; GEMMs of this shape in a step (one a block)
  bool head;
};

// One plain fp32 sgemm with OpenBLAS's own threads.
double sgemm_ms(int reps, bool ta, bool tb, int M, int N, int K) {
  std::vector<float> a(static_cast<std::size_t>(M) * K, 0.5f), b(static_cast<std::size_t>(K) * N, 0.25f),
      c(static_cast<std::size_t>(M) * N, 0.0f);
  return time_ms(reps, [&] {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
                1.0f, a.data(), ta ? M : K, b.data(), tb ? K : N, 1.0f, c.data(), N);
  });
}

struct Owned {
  CpuBackend& be;
  std::vector<Tensor> t;
  Tensor make(DType dt, std::int64_t n) {
    Tensor x;
    x.dtype = dt;
    x.numel = n;
    x.space = Space::Device;
    x.data = be.memory(Space::Device).allocate(x.bytes());
    be.fill_zero(x);
    t.push_back(x);
    return x;
  }
  ~Owned() {
    for (const Tensor& x : t) be.memory(Space::Device).deallocate(x.data, x.bytes());
  }
};

// Our op on shape s: forward then backward time (a linear), or the whole head + loss.
std::pair<double, double> ours_ms(int reps, const ModelConfig& m, DType dt, const Shape& s) {
  CpuBackend be(2);
  Owned o{be, {}};
  ModelConfig mc = m;
  mc.dtype = dt;
  be.set_workspace(o.make(DType::U8, static_cast<std::int64_t>(be.workspace_bytes(mc))));
  const std::int64_t M = m.tokens();
  Tensor x = o.make(dt, M * s.K), W = o.make(dt, static_cast<std::int64_t>(s.N) * s.K);
  Tensor dW = o.make(dt, static_cast<std::int64_t>(s.N) * s.K), dx = o.make(dt, M * s.K);
  if (s.head) {
    Tensor tg = o.make(DType::I32, M), loss = o.make(DType::F32, M);
    const double t = time_ms(reps, [&] {
      be.head_loss(x, W, tg, loss, dx, dW, M, s.K, s.N, 1.0f / static_cast<float>(M), 0.0f, 1.0f);
    });
    return {t, 0.0};
  }
  Tensor b = o.make(dt, s.N), y = o.make(dt, M * s.N), db = o.make(dt, s.N);
  const double f = time_ms(reps, [&] { be.linear_fwd(x, W, &b, y, M, s.K, s.N); });
  const double bw = time_ms(reps, [&] { be.linear_bwd(x, W, y, &dx, dW, &db, M, s.K, s.N, false); });
  return {f, bw};
}

double step_run(const ModelConfig& m, int steps, double& flops) {
  const Trace t = bench::train_none(m, steps);
  flops = static_cast<double>(t.flops.total());
  return t.median_step_ms();
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::vector<std::string> presets;
  for (int i = 2; i < argc; ++i) presets.emplace_back(argv[i]);
  if (presets.empty()) presets = {"tiny", "small", "gpt2-124m"};
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  std::printf("OPENBLAS_CORETYPE=%s; our ops on 2 lanes, sgemm with 2 OpenBLAS threads; median of %d\n",
              core ? core : "unset", reps);
  std::printf("| preset | GEMM | M x K x N | fp32 sgemm ms (fwd; bwd) | variant | ours ms (fwd; bwd) | sgemm / ours |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  struct Variant {
    const char* name;
    DType dt;
    cpu::GemmPath path;
  };
  std::vector<Variant> variants = {{"fp32", DType::F32, cpu::GemmPath::OpenBlas},
                                   {"bf16 openblas", DType::BF16, cpu::GemmPath::OpenBlas}};
  std::string no_dnnl;
  if (cpu::dnnl_matmul_available(&no_dnnl)) variants.push_back({"bf16 dnnl", DType::BF16, cpu::GemmPath::Dnnl});
  else std::printf("bf16 dnnl left out: %s on this CPU\n", no_dnnl.c_str());
  const cpu::GemmPath initial = cpu::gemm_path();
  std::vector<std::string> step_lines;
  for (const std::string& p : presets) {
    ModelConfig m = resolve_model(p);
    if (p == "gpt2-124m") m.seq = 128, m.batch = 1;
    const int M = static_cast<int>(m.tokens()), H = m.hidden;
    const std::vector<Shape> shapes = {{"attn.qkv", H, 3 * H, m.layers, false},
                                       {"attn.proj", H, H, m.layers, false},
                                       {"mlp.fc", H, m.ffn, m.layers, false},
                                       {"mlp.fc2", m.ffn, H, m.layers, false},
                                       {"head", H, m.vocab, 1, true}};
    double gemm_flops = 0, sgemm_total_ms = 0;
    std::vector<double> ours_total(variants.size(), 0.0);
    for (const Shape& s : shapes) {
      openblas_set_num_threads(2);
      const double f = sgemm_ms(reps, false, true, M, s.N, s.K);          // y = x W^T
      const double dw = sgemm_ms(reps, true, false, s.N, s.K, M);         // dW += dy^T x
      const double dx = sgemm_ms(reps, false, false, M, s.K, s.N);        // dx = dy W
      openblas_set_num_threads(1);
      const double sg_b = dw + dx;
      gemm_flops += 6.0 * M * s.K * s.N * s.count;
      sgemm_total_ms += (f + sg_b) * s.count;
      for (std::size_t v = 0; v < variants.size(); ++v) {
        cpu::set_gemm_path(variants[v].path);
        const auto [of, ob] = ours_ms(reps, m, variants[v].dt, s);
        ours_total[v] += (of + ob) * s.count;
        if (s.head)
          std::printf("| %s | %s | %d x %d x %d | %.3f (3 GEMMs) | %s | %.3f (head + loss) | %.2f |\n",
                      p.c_str(), s.name, M, s.K, s.N, f + sg_b, variants[v].name, of, (f + sg_b) / of);
        else
          std::printf("| %s | %s | %d x %d x %d | %.3f; %.3f | %s | %.3f; %.3f | %.2f; %.2f |\n", p.c_str(),
                      s.name, M, s.K, s.N, f, sg_b, variants[v].name, of, ob, f / of, sg_b / ob);
        std::fflush(stdout);
      }
    }
    const double sgemm_rate = gemm_flops / sgemm_total_ms / 1e6;  // GFLOP/s
    for (std::size_t v = 0; v < variants.size(); ++v) {
      cpu::set_gemm_path(variants[v].path);
      ModelConfig mv = m;
      mv.dtype = variants[v].dt;
      double flops = 0;
      const double ms = step_run(mv, std::max(2, reps / 2), flops);
      char line[512];
      std::snprintf(line, sizeof line,
                    "| %s | %s | %.1f | %.2f | %.1f | %.1f | %.2f | %.2f |", p.c_str(), variants[v].name, ms,
                    flops / 1e9, flops / ms / 1e6, sgemm_rate, flops / ms / 1e6 / sgemm_rate,
                    sgemm_total_ms / ours_total[v]);
      step_lines.emplace_back(line);
    }
  }
  cpu::set_gemm_path(initial);
  std::printf("\n| preset | variant | step ms | step GFLOP | step GFLOP/s | FLOP-weighted sgemm GFLOP/s | "
              "step efficiency | GEMM ops alone: sgemm / ours |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const std::string& l : step_lines) std::printf("%s\n", l.c_str());
  return 0;
}
