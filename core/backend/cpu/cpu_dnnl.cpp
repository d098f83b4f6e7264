#include "core/backend/cpu/cpu_dnnl.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/util/error.h"
#include "core/util/fork_guard.h"

namespace remat::cpu {

namespace {

using dt = dnnl::memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// One matmul for a packed problem: A [M, K] row-major, B [K, N] row-major or (tb) stored as
// its transpose, C [M, N] row-major, `sum`: C += product. Primitives are built once per shape
// (building one compiles code) and shared by the lanes: executing one is thread-safe.
struct Matmul {
  dnnl::memory::desc a, b, c;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  std::size_t scratch = 0;
};

using Key = std::tuple<int, int, int, bool, bool>;

// oneDNN threads with OpenMP; held at one thread in every thread that calls it.
void one_omp_thread() {
  thread_local bool done = false;
  if (!done) omp_set_num_threads(1), done = true;
}

std::shared_ptr<Matmul> build(int M, int N, int K, bool tb, bool sum) {
  auto m = std::make_shared<Matmul>();
  m->a = dnnl::memory::desc({M, K}, dt::bf16, dnnl::memory::dims{K, 1});
  m->b = dnnl::memory::desc({K, N}, dt::bf16, tb ? dnnl::memory::dims{1, K} : dnnl::memory::dims{N, 1});
  m->c = dnnl::memory::desc({M, N}, dt::f32, dnnl::memory::dims{N, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (sum) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  m->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(m->a, m->b, m->c), attr, cpu_engine());
  m->prim = dnnl::matmul(m->pd);
  m->scratch = m->pd.scratchpad_desc().get_size();
  return m;
}

std::shared_ptr<Matmul> matmul_for(int M, int N, int K, bool tb, bool sum) {
  static std::shared_mutex mu;
  static std::map<Key, std::shared_ptr<Matmul>> cache;
  const Key key{M, N, K, tb, sum};
  {
    std::shared_lock lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto m = build(M, N, K, tb, sum);
  std::unique_lock lock(mu);
  return cache.emplace(key, std::move(m)).first->second;
}

std::string probe_impl() {
  try {
    one_omp_thread();
    return matmul_for(64, 64, 64, true, false)->pd.impl_info_str();
  } catch (const dnnl::error& e) {
    return std::string("unavailable (") + e.what() + ")";
  }
}

const std::string& impl_name() {
  static const std::string name = probe_impl();
  return name;
}

std::once_flag g_once;
std::atomic<GemmPath> g_path{GemmPath::OpenBlas};

// Per-lane buffers, grown as needed and kept.
struct LaneBuffers {
  std::vector<std::uint16_t> a, b;
  std::vector<float> c;
  std::vector<std::uint8_t> scratch;
};

LaneBuffers& lane_buffers() {
  thread_local LaneBuffers buf;
  return buf;
}

template <class T>
T* sized(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace

bool dnnl_has_bf16_kernel() {
  const std::string& n = impl_name();
  return n.find("amx") != std::string::npos || n.find("bf16") != std::string::npos;
}

bool dnnl_matmul_available(std::string* why) {
  const bool ok = impl_name().rfind("unavailable", 0) != 0;
  if (why) *why = ok ? "" : "oneDNN's bf16 matmul is " + impl_name();
  return ok;
}

GemmPath gemm_path_from(const std::string& spec) {
  if (spec == "openblas") return GemmPath::OpenBlas;
  if (spec == "dnnl") {
    std::string why;
    if (!dnnl_matmul_available(&why)) throw Error("REMAT_GEMM=dnnl: " + why + " on this CPU");
    return GemmPath::Dnnl;
  }
  if (spec == "auto" || spec.empty())
    return dnnl_has_bf16_kernel() ? GemmPath::Dnnl : GemmPath::OpenBlas;
  throw Error("REMAT_GEMM must be auto, openblas or dnnl, got '" + spec + "'");
}

GemmPath gemm_path() {
  std::call_once(g_once, [] {
    const char* env = std::getenv("REMAT_GEMM");
    g_path.store(gemm_path_from(env ? env : "auto"));
  });
  return g_path.load();
}

void set_gemm_path(GemmPath p) {
  gemm_path();  // the first choice must not overwrite this one later
  g_path.store(p);
}

std::string gemm_path_name() {
  return gemm_path() == GemmPath::Dnnl ? "dnnl " + impl_name() : "openblas";
}

void bgemm1(bool trans_a, bool trans_b, int M, int N, int K, const std::uint16_t* A, int lda,
            const std::uint16_t* B, int ldb, float beta, float* C, int ldc) {
  one_omp_thread();
  LaneBuffers& buf = lane_buffers();
  // A as [M, K] rows of K.
  if (trans_a || lda != K) {
    std::uint16_t* a = sized(buf.a, static_cast<std::size_t>(M) * K);
    if (trans_a) {  // in 32 x 32 tiles, so reads and writes both stay in a few cache lines
      constexpr int kT = 32;
      for (int k0 = 0; k0 < K; k0 += kT)
        for (int m0 = 0; m0 < M; m0 += kT)
          for (int k = k0; k < std::min(K, k0 + kT); ++k)
            for (int m = m0; m < std::min(M, m0 + kT); ++m)
              a[static_cast<std::size_t>(m) * K + k] = A[static_cast<std::size_t>(k) * lda + m];
    } else {
      for (int m = 0; m < M; ++m)
        std::memcpy(a + static_cast<std::size_t>(m) * K, A + static_cast<std::size_t>(m) * lda, 2u * K);
    }
    A = a;
  }
  // B as [K, N] rows of N, or (trans_b) [N, K] rows of K.
  const int brows = trans_b ? N : K, bcols = trans_b ? K : N;
  if (ldb != bcols) {
    std::uint16_t* b = sized(buf.b, static_cast<std::size_t>(brows) * bcols);
    for (int r = 0; r < brows; ++r)
      std::memcpy(b + static_cast<std::size_t>(r) * bcols, B + static_cast<std::size_t>(r) * ldb, 2u * bcols);
    B = b;
  }
  // C: written in place when its rows are packed, else through a packed buffer.
  const bool packed_c = ldc == N;
  const bool sum = beta != 0.0f && packed_c;
  float* c = packed_c ? C : sized(buf.c, static_cast<std::size_t>(M) * N);
  try {
    std::shared_ptr<Matmul> mm = matmul_for(M, N, K, trans_b, sum);
    auto& eng = cpu_engine();
    dnnl::memory am(mm->a, eng, const_cast<std::uint16_t*>(A));
    dnnl::memory bm(mm->b, eng, const_cast<std::uint16_t*>(B));
    dnnl::memory cm(mm->c, eng, c);
    dnnl::memory sm(mm->pd.scratchpad_desc(), eng, sized(buf.scratch, mm->scratch + 64));
    dnnl::stream s(eng);
    std::shared_lock lock(fork_guard());  // never while a plugin child is forked (fork_guard.h)
    mm->prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm},
                         {DNNL_ARG_SCRATCHPAD, sm}});
    s.wait();
  } catch (const dnnl::error& e) {
    throw Error(std::string("oneDNN matmul ") + std::to_string(M) + "x" + std::to_string(N) + "x" +
                std::to_string(K) + ": " + e.what());
  }
  if (packed_c) return;
  for (int m = 0; m < M; ++m) {
    float* dst = C + static_cast<std::size_t>(m) * ldc;
    const float* src = c + static_cast<std::size_t>(m) * N;
    if (beta != 0.0f)
      for (int n = 0; n < N; ++n) dst[n] += src[n];
    else
      std::memcpy(dst, src, 4u * N);
  }
}

}  // namespace remat::cpu
