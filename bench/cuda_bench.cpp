// The GPU speed figures of one run on one device, printed as one JSON object per line (each
// with a "figure" key; bench/device/speed_table.py reads them) and a readable summary last:
//   step            gpt2-124m `none` step time, flash and naive, CUPTI off and on (run_training,
//                   warmup + counted steps, median)
//   device_memory   cudaMemGetInfo total - free right after the naive `none` run without CUPTI
//                   (the caching pool still holds every block it reserved), and the pool's bytes
//   gemm_ceiling    bf16 8192^3 through our cuBLASLt path (CudaBackend::linear_fwd)
//   host_link       pinned host <-> device, 256 MiB through CudaBackend::copy (the copy stream)
//   flash_attention our causal flash forward and forward + backward, bf16, d=64, tensor cores
//   cupti_overhead  step time with CUPTI over without
//   mfu             llm.c's FLOPs per step (6N + 6·L·C·T per token) / step time / GEMM ceiling
// A figure that fails prints {"figure": "error", ...} and the next one still runs.
// Runs without CUPTI come first, so no figure but the CUPTI-on steps ever runs after CUPTI was
// enabled in this process.
//
// Usage: cuda_bench [--quick] [--model NAME] [--device N] [--only steps,gemm,link,flash,head]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_entry.h"
#include "core/engine/run.h"
#include "core/memory/tracking_allocator.h"
#include "core/model/model_source.h"
#include "core/model/param_layout.h"
#include "core/schedule/schedule.h"
#include "core/util/bf16.h"
#include "core/util/error.h"

using namespace remat;
using nlohmann::json;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct Options {
  bool quick = false;
  std::string model = "gpt2-124m";
  int device = 0;
  std::set<std::string> only;  // empty: everything
  bool wants(const char* g) const { return only.empty() || only.count(g); }
};

std::vector<std::string> g_summary;

void emit(const json& j) {
  std::printf("%s\n", j.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  std::fflush(stdout);
}

void note(const std::string& line) {
  std::printf("  %s\n", line.c_str());
  std::fflush(stdout);
  g_summary.push_back(line);
}

void fail(const std::string& what, const std::string& why) {
  emit({{"figure", "error"}, {"what", what}, {"error", why}});
  std::fprintf(stderr, "cuda_bench: %s failed: %s\n", what.c_str(), why.c_str());
  g_summary.push_back(what + ": FAILED: " + why);
  cudaGetLastError();  // clear a non-sticky error so the next figure starts clean
}

// Runs f; an exception becomes an error line naming `what`.
void attempt(const std::string& what, const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    fail(what, e.what());
  } catch (...) {
    fail(what, "unknown exception");
  }
}

std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median milliseconds of `reps` runs of f on stream s, each between two events, after `warm`.
class EventTimer {
 public:
  EventTimer() {
    REMAT_CUDA(cudaEventCreate(&a_));
    REMAT_CUDA(cudaEventCreate(&b_));
  }
  ~EventTimer() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  double median_ms(cudaStream_t s, const std::function<void()>& f, int warm, int reps) {
    for (int i = 0; i < warm; ++i) f();
    REMAT_CUDA(cudaDeviceSynchronize());
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      REMAT_CUDA(cudaEventRecord(a_, s));
      f();
      REMAT_CUDA(cudaEventRecord(b_, s));
      REMAT_CUDA(cudaEventSynchronize(b_));
      float ms = 0.0f;
      REMAT_CUDA(cudaEventElapsedTime(&ms, a_, b_));
      t.push_back(ms);
    }
    return median_of(t);
  }

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

std::unique_ptr<Backend> make_backend(int device) {
  char err[1024] = {0};
  std::unique_ptr<Backend> b(remat_cuda_backend_create(device, err, sizeof err));
  if (!b) throw Error(std::string("remat_cuda_backend_create: ") + err);
  return b;
}

cuda::CudaBackend& as_cuda(Backend& b) {
  auto* c = dynamic_cast<cuda::CudaBackend*>(&b);
  if (!c) throw Error("the backend is not a CudaBackend");
  return *c;
}

// Tensors from the backend's own memory resources, through a tracking allocator, with the
// op workspace set; freed (and the workspace unset) when it goes out of scope.
class Scratch {
 public:
  Scratch(cuda::CudaBackend& be, std::size_t workspace_bytes)
      : be_(be), alloc_(be.memory(Space::Device), be.memory(Space::Host), clock_) {
    ws_ = get(DType::U8, static_cast<std::int64_t>(workspace_bytes));
    be_.set_workspace(ws_);
  }
  ~Scratch() {
    try {  // after a CUDA error these may throw too; the pool's destructor still frees it all
      be_.synchronize();
      be_.set_workspace(Tensor{});
      for (auto it = held_.rbegin(); it != held_.rend(); ++it) alloc_.free(*it);
    } catch (...) {
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Tensor get(DType dt, std::int64_t n, Space s = Space::Device) {
    AllocTag tag;
    tag.category = s == Space::Host ? Category::HostOffloaded : Category::Workspace;
    tag.tensor = "bench";
    held_.push_back(alloc_.allocate(dt, n, tag, s));
    return held_.back();
  }

 private:
  cuda::CudaBackend& be_;
  SteadyClock clock_;
  TrackingAllocator alloc_;
  Tensor ws_;
  std::vector<Tensor> held_;
};

// Uniform bf16 values in [-0.5, 0.5).
void fill_bf16(Backend& be, const Tensor& t, std::uint32_t seed) {
  std::vector<std::uint16_t> v(static_cast<std::size_t>(t.numel));
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    e = float_to_bf16(static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
  }
  be.write_bytes(t, v.data());
}

// --- step times and device memory ---

struct StepFigure {
  std::string attention;
  bool cupti = false;
  double median_ms = 0.0;
};

std::optional<StepFigure> step_figure(const Options& o, AttentionImpl attn, bool cupti,
                                      bool sample_memory) {
  ModelConfig m = resolve_model(o.model);
  m.attention = attn;
  m.dropout = 0.0;
  m.dtype = DType::BF16;
  const int warmup = o.quick ? 1 : 2, steps = o.quick ? 3 : 10;
  const std::string label = std::string(to_string(attn)) + (cupti ? " cupti on" : " cupti off");
  std::optional<StepFigure> result;
  attempt("step " + label, [&] {
    std::unique_ptr<Backend> be = make_backend(o.device);
    cuda::CudaBackend& cb = as_cuda(*be);
    SteadyClock clock;
    std::unique_ptr<Profiler> prof;
    if (cupti) {
      char err[1024] = {0};
      prof.reset(remat_cuda_profiler_create(be.get(), &clock, err, sizeof err));
      if (!prof) throw Error(std::string("remat_cuda_profiler_create: ") + err);
    }
    RunSpec spec;
    spec.model = m;
    spec.schedule = store_all_schedule(m.layers);
    spec.warmup = warmup;
    spec.steps = steps;
    Trace t = run_training(spec, *be, prof.get(), clock);
    if (!t.complete) throw Error("run " + t.status + ": " + t.error);
    // Right after the run: the run's tensors went back to the caching pool, which still holds
    // every block it reserved (it gives nothing back unless an allocation fails).
    std::size_t free_b = 0, total_b = 0;
    if (sample_memory) REMAT_CUDA(cudaMemGetInfo(&free_b, &total_b));
    const std::uint64_t pool_reserved = cb.device_pool().reserved_bytes();
    prof.reset();  // before the backend
    be.reset();
    const double ms = t.median_step_ms();
    emit({{"figure", "step"}, {"model", m.name}, {"attention", to_string(attn)}, {"cupti", cupti},
          {"policy", "none"}, {"batch", m.batch}, {"seq", m.seq}, {"warmup", warmup},
          {"steps", steps}, {"step_ms_median", ms}, {"step_ms", t.step_times_ms()},
          {"tokens_per_s", static_cast<double>(m.tokens()) / ms * 1e3},
          {"peak_bytes", t.peak_bytes}, {"predicted_peak_bytes", t.predicted_peak_bytes},
          {"peak_reserved_bytes", t.peak_reserved_bytes},
          {"profiler_overhead_ns", t.profiler_overhead_ns},
          {"cupti_api", std::getenv("REMAT_CUPTI_API") ? std::getenv("REMAT_CUPTI_API") : "both"},
          {"records_without_op", std::count_if(t.ops.begin(), t.ops.end(),
                                               [](const OpRecord& r) { return r.op.empty(); })}});
    note(m.name + " none " + label +
         fmt(": %.2f ms (median of %.0f steps), peak %.0f MiB", ms, steps,
             static_cast<double>(t.peak_bytes) / kMiB));
    if (sample_memory) {
      const std::uint64_t in_use = total_b - free_b;
      emit({{"figure", "device_memory"}, {"attention", to_string(attn)}, {"cupti", cupti},
            {"policy", "none"}, {"in_use_bytes", in_use}, {"total_bytes", total_b},
            {"pool_reserved_bytes", pool_reserved}, {"peak_reserved_bytes", t.peak_reserved_bytes},
            {"peak_bytes", t.peak_bytes},
            {"how", "cudaMemGetInfo total - free right after the run, the caching pool holding its blocks"}});
      note(fmt("device memory in use after the naive none run: %.0f MiB (pool reserved %.0f MiB, "
               "tracked peak %.0f MiB)",
               static_cast<double>(in_use) / kMiB, static_cast<double>(pool_reserved) / kMiB,
               static_cast<double>(t.peak_bytes) / kMiB));
    }
    result = StepFigure{to_string(attn), cupti, ms};
  });
  return result;
}

// --- GEMM ceiling ---

std::optional<double> gemm_ceiling(const Options& o) {
  std::optional<double> tflops;
  attempt("gemm_ceiling", [&] {
    std::unique_ptr<Backend> be = make_backend(o.device);
    cuda::CudaBackend& g = as_cuda(*be);
    {
      Scratch s(g, cuda::CudaBackend::kGemmWorkspace + (std::size_t{16} << 20));
      const int n = 8192;
      const std::int64_t nn = std::int64_t{n} * n;
      Tensor x = s.get(DType::BF16, nn), W = s.get(DType::BF16, nn), y = s.get(DType::BF16, nn);
      fill_bf16(g, x, 1);
      fill_bf16(g, W, 2);
      EventTimer tm;
      const double ms = tm.median_ms(g.compute_stream(), [&] { g.linear_fwd(x, W, nullptr, y, n, n, n); },
                                     o.quick ? 2 : 5, o.quick ? 5 : 20);
      const double t = 2.0 * n * static_cast<double>(n) * n / ms / 1e9;
      emit({{"figure", "gemm_ceiling"}, {"M", n}, {"N", n}, {"K", n}, {"dtype", "bf16"},
            {"path", "CudaBackend::linear_fwd (cuBLASLt)"}, {"ms", ms}, {"tflops", t}});
      note(fmt("GEMM ceiling: bf16 8192^3 %.3f ms, %.1f TFLOP/s", ms, t));
      tflops = t;
    }
  });
  return tflops;
}

// --- host link ---

void host_link(const Options& o) {
  attempt("host_link", [&] {
    std::unique_ptr<Backend> be = make_backend(o.device);
    cuda::CudaBackend& g = as_cuda(*be);
    Scratch s(g, cuda::CudaBackend::kGemmWorkspace);
    const std::int64_t bytes = std::int64_t{256} << 20;
    Tensor h = s.get(DType::U8, bytes, Space::Host), d = s.get(DType::U8, bytes);
    std::memset(h.data, 1, static_cast<std::size_t>(bytes));  // touch every pinned page
    g.fill_zero(d);
    EventTimer tm;
    const int warm = 2, reps = o.quick ? 3 : 10;
    for (const char* dir : {"h2d", "d2h"}) {
      const bool h2d = std::strcmp(dir, "h2d") == 0;
      const double ms = tm.median_ms(g.copy_stream(h2d), [&] { h2d ? g.copy(d, h) : g.copy(h, d); }, warm, reps);
      const double gbs = static_cast<double>(bytes) / ms / 1e6;
      emit({{"figure", "host_link"}, {"direction", dir}, {"bytes", bytes}, {"pinned", true},
            {"path", "CudaBackend::copy (copy stream)"}, {"ms", ms}, {"gb_s", gbs}});
      note(fmt(h2d ? "host link H2D: 256 MiB pinned in %.3f ms, %.1f GB/s"
                   : "host link D2H: 256 MiB pinned in %.3f ms, %.1f GB/s",
               ms, gbs));
    }
    // Both directions at once (the two copy streams), as an offload and a prefetch overlap.
    Tensor h2 = s.get(DType::U8, bytes, Space::Host), d2 = s.get(DType::U8, bytes);
    std::memset(h2.data, 2, static_cast<std::size_t>(bytes));
    g.fill_zero(d2);
    std::vector<double> both_ms;
    for (int i = 0; i < warm + reps; ++i) {
      g.synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      g.copy(d, h);
      g.copy(h2, d2);
      g.synchronize();
      const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
      if (i >= warm) both_ms.push_back(dt.count());
    }
    const double ms = median_of(both_ms);
    const double gbs = static_cast<double>(bytes) / ms / 1e6;
    emit({{"figure", "host_link"}, {"direction", "both"}, {"bytes", bytes}, {"pinned", true},
          {"path", "CudaBackend::copy, one copy each way at once (host clock)"}, {"ms", ms},
          {"gb_s", gbs}});
    note(fmt("host link both ways at once: 256 MiB each way in %.3f ms, %.1f GB/s each way", ms,
             gbs));
  });
}

// --- flash attention kernels ---

void flash_kernels(const Options& o) {
  struct Shape { int B, H, T; };
  for (Shape sh : {Shape{2, 12, 4096}, Shape{1, 16, 16384}}) {
    const std::string what = "flash_attention B=" + std::to_string(sh.B) + " H=" + std::to_string(sh.H) +
                             " T=" + std::to_string(sh.T);
    attempt(what, [&] {
      std::unique_ptr<Backend> be = make_backend(o.device);
      cuda::CudaBackend& g = as_cuda(*be);
      g.set_flash_impl(kernels::FlashImpl::TensorCore);  // throws rather than fall back
      const int D = 64;
      AttnDims a;
      a.B = sh.B;
      a.S = sh.T;
      a.heads = sh.H;
      a.kv_heads = sh.H;
      a.d = D;
      a.scale = 1.0f / std::sqrt(static_cast<float>(D));
      Scratch s(g, cuda::CudaBackend::kGemmWorkspace +
                       kernels::flash_bwd_scratch_bytes(a.B, a.heads, a.S) + (std::size_t{1} << 20));
      const std::int64_t rows = std::int64_t{a.B} * a.S;
      Tensor qkv = s.get(DType::BF16, rows * 3 * a.heads * D), dqkv = s.get(DType::BF16, rows * 3 * a.heads * D);
      Tensor ctx = s.get(DType::BF16, rows * a.heads * D), dctx = s.get(DType::BF16, rows * a.heads * D);
      Tensor lse = s.get(DType::F32, std::int64_t{a.B} * a.heads * a.S);
      fill_bf16(g, qkv, 3);
      fill_bf16(g, dctx, 4);
      g.fill_zero(dqkv);  // the backward accumulates into it
      DropoutKey key;
      EventTimer tm;
      const int warm = 2, reps = o.quick ? 3 : 10;
      const double flops = 4.0 * a.B * a.heads * static_cast<double>(a.S) * a.S * D / 2.0;  // causal
      // 16 query rows per warp in the forward and dQ kernels (the default), then 32.
      for (int groups : {1, 2}) {
        g.set_flash_row_groups(groups);
        const double f = tm.median_ms(g.compute_stream(), [&] { g.flash_fwd(qkv, ctx, lse, a, key, 0.0f); }, warm, reps);
        const double fb = tm.median_ms(g.compute_stream(), [&] {
          g.flash_fwd(qkv, ctx, lse, a, key, 0.0f);
          g.flash_bwd(qkv, ctx, lse, dctx, dqkv, a, key, 0.0f);
        }, warm, reps);
        emit({{"figure", "flash_attention"}, {"B", a.B}, {"H", a.heads}, {"T", a.S}, {"D", D},
              {"causal", true}, {"dtype", "bf16"}, {"impl", "tensor-core"},
              {"query_rows_per_warp", 16 * groups}, {"fwd_ms", f}, {"fwd_tflops", flops / f / 1e9},
              {"fwdbwd_ms", fb}, {"fwdbwd_tflops", 3.5 * flops / fb / 1e9}});
        note(what + ", " + std::to_string(16 * groups) + " query rows a warp" +
             fmt(": fwd %.3f ms (%.1f TFLOP/s), fwd+bwd %.3f ms (%.1f TFLOP/s)", f, flops / f / 1e9,
                 fb, 3.5 * flops / fb / 1e9));
      }
      g.set_flash_row_groups(1);
    });
  }
}

// --- the head (logits in chunks, cross-entropy, both gradients) at several chunk sizes ---

void head_chunks(const Options& o) {
  ModelConfig m = resolve_model(o.model);
  const std::int64_t rows = m.tokens();
  const int H = m.hidden, V = m.vocab;
  for (std::size_t mib : {64, 128, 256}) {
    const std::string what = "head_loss chunk " + std::to_string(mib) + " MiB";
    attempt(what, [&] {
      std::unique_ptr<Backend> be = make_backend(o.device);
      cuda::CudaBackend& g = as_cuda(*be);
      g.set_head_chunk_bytes(mib << 20);
      const std::int64_t chunk = cuda::CudaBackend::head_chunk_rows(rows, V, mib << 20);
      const std::size_t n = static_cast<std::size_t>(chunk) * V;
      Scratch s(g, cuda::CudaBackend::kGemmWorkspace + n * 6 + (std::size_t{1} << 20));
      Tensor x = s.get(DType::BF16, rows * H), dx = s.get(DType::BF16, rows * H);
      Tensor W = s.get(DType::BF16, static_cast<std::int64_t>(V) * H);
      Tensor dW = s.get(DType::BF16, static_cast<std::int64_t>(V) * H);
      Tensor targets = s.get(DType::I32, rows), losses = s.get(DType::F32, rows);
      fill_bf16(g, x, 5);
      fill_bf16(g, W, 6);
      g.fill_zero(dW);
      std::vector<std::int32_t> tg(static_cast<std::size_t>(rows));
      for (std::size_t i = 0; i < tg.size(); ++i) tg[i] = static_cast<std::int32_t>((i * 7919) % V);
      g.write_bytes(targets, tg.data());
      EventTimer tm;
      const int warm = 2, reps = o.quick ? 3 : 10;
      const double ms = tm.median_ms(g.compute_stream(), [&] {
        g.head_loss(x, W, targets, losses, dx, dW, rows, H, V, 1.0f / static_cast<float>(rows), 0.0f, 1.0f);
      }, warm, reps);
      const double flops = 3.0 * 2.0 * static_cast<double>(rows) * H * V;
      emit({{"figure", "head_loss"}, {"model", m.name}, {"rows", rows}, {"H", H}, {"V", V},
            {"chunk_mib", mib}, {"chunk_rows", chunk}, {"chunks", (rows + chunk - 1) / chunk},
            {"ms", ms}, {"tflops", flops / ms / 1e9},
            {"workspace_bytes", g.workspace_bytes(m)}});
      note(what + fmt(": %.0f rows a chunk, %.3f ms (%.1f TFLOP/s incl. the cross-entropy)",
                      static_cast<double>(chunk), ms, flops / ms / 1e9));
    });
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--model") {
      o.model = value();
    } else if (a == "--device") {
      o.device = std::stoi(value());
    } else if (a == "--only") {
      std::stringstream ss(value());
      std::string g;
      while (std::getline(ss, g, ','))
        if (!g.empty()) o.only.insert(g);
    } else if (a == "--help" || a == "-h") {
      std::printf("usage: cuda_bench [--quick] [--model NAME] [--device N] [--only steps,gemm,link,flash,head]\n");
      std::exit(0);
    } else {
      throw Error("unknown argument '" + a + "' (see --help)");
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_bench: %s\n", e.what());
    return 2;
  }
  char why[512] = {0};
  if (remat_cuda_device_count(why, sizeof why) <= 0) {
    fail("device", std::string("no usable CUDA device: ") + why);
    return 2;
  }
  attempt("device", [&] {
    REMAT_CUDA(cudaSetDevice(o.device));
    REMAT_CUDA(cudaFree(nullptr));  // create the context
    cudaDeviceProp p{};
    REMAT_CUDA(cudaGetDeviceProperties(&p, o.device));
    int driver = 0, runtime = 0;
    REMAT_CUDA(cudaDriverGetVersion(&driver));
    REMAT_CUDA(cudaRuntimeGetVersion(&runtime));
    std::size_t free_b = 0, total_b = 0;
    REMAT_CUDA(cudaMemGetInfo(&free_b, &total_b));
    emit({{"figure", "device"}, {"name", p.name}, {"cc", std::to_string(p.major) + "." + std::to_string(p.minor)},
          {"sms", p.multiProcessorCount}, {"total_bytes", total_b}, {"context_in_use_bytes", total_b - free_b},
          {"driver", driver}, {"runtime", runtime}, {"quick", o.quick}});
    note(std::string(p.name) + fmt(", %.0f SMs, %.0f MiB, %.0f MiB in use with only the context",
                                   p.multiProcessorCount, static_cast<double>(total_b) / kMiB,
                                   static_cast<double>(total_b - free_b) / kMiB));
  });

  std::vector<StepFigure> steps;
  auto add = [&](const std::optional<StepFigure>& f) {
    if (f) steps.push_back(*f);
  };
  // Without CUPTI first: the memory figure on a process that has run nothing else.
  if (o.wants("steps")) {
    add(step_figure(o, AttentionImpl::Naive, false, true));
    add(step_figure(o, AttentionImpl::Flash, false, false));
  }
  std::optional<double> ceiling;
  if (o.wants("gemm")) ceiling = gemm_ceiling(o);
  if (o.wants("link")) host_link(o);
  if (o.wants("flash")) flash_kernels(o);
  if (o.wants("head")) head_chunks(o);
  if (o.wants("steps")) {
    add(step_figure(o, AttentionImpl::Naive, true, false));
    add(step_figure(o, AttentionImpl::Flash, true, false));
  }

  auto find = [&](const std::string& attn, bool cupti) -> const StepFigure* {
    for (const auto& s : steps)
      if (s.attention == attn && s.cupti == cupti) return &s;
    return nullptr;
  };
  for (const char* attn : {"flash", "naive"}) {
    const StepFigure *on = find(attn, true), *off = find(attn, false);
    if (on && off && off->median_ms > 0) {
      emit({{"figure", "cupti_overhead"}, {"attention", attn}, {"on_ms", on->median_ms},
            {"off_ms", off->median_ms}, {"ratio", on->median_ms / off->median_ms}});
      note(std::string("CUPTI on/off, ") + attn + fmt(": %.2f / %.2f ms = %.3f", on->median_ms, off->median_ms,
                                                     on->median_ms / off->median_ms));
    }
  }
  if (!steps.empty()) {
    attempt("mfu", [&] {
      ModelConfig m = resolve_model(o.model);
      const double N = static_cast<double>(ParamLayout(m).total());
      const double per_token = 6.0 * N + 6.0 * m.layers * static_cast<double>(m.hidden) * m.seq;
      const double per_step = per_token * static_cast<double>(m.tokens());
      for (const auto& s : steps) {
        const double achieved = per_step / s.median_ms / 1e9;
        json j = {{"figure", "mfu"}, {"attention", s.attention}, {"cupti", s.cupti},
                  {"params", N}, {"flops_per_token", per_token}, {"flops_per_step", per_step},
                  {"step_ms", s.median_ms}, {"tflops", achieved},
                  {"ceiling_tflops", ceiling ? json(*ceiling) : json(nullptr)},
                  {"mfu", ceiling ? json(achieved / *ceiling) : json(nullptr)}};
        emit(j);
        note("MFU " + s.attention + (s.cupti ? " cupti on" : " cupti off") +
             fmt(": %.1f TFLOP/s", achieved) +
             (ceiling ? fmt(" = %.1f%% of the GEMM ceiling", 100.0 * achieved / *ceiling) : std::string(" (no ceiling)")));
      }
    });
  }

  std::printf("\n== cuda_bench summary\n");
  for (const auto& l : g_summary) std::printf("%s\n", l.c_str());
  std::size_t failed = 0;
  for (const auto& l : g_summary) failed += l.find(": FAILED: ") != std::string::npos;
  return failed ? 1 : 0;
}
