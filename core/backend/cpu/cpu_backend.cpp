// The CPU backend's setup, memory ops, workspace sizing and the shared internals.
#include "core/backend/cpu/cpu_backend.h"
#include "core/util/host_memory.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/backend/cpu/cpu_common.h"
#include "core/backend/cpu/cpu_dnnl.h"
#include "core/backend/cpu/cpu_gemm_parts.h"
#include "core/graph/block_graph.h"
#include "core/util/fork_guard.h"

namespace remat {
namespace cpu {

std::string describe_tensor(const Tensor& t) {
  return std::string(to_string(t.dtype)) + "[" + std::to_string(t.numel) + "] in " +
         to_string(t.space) + " space";
}

namespace {

void check_common(const Tensor& t, const char* op, const char* name, std::int64_t need) {
  if (t.space != Space::Device)
    throw Error(std::string("cpu ") + op + ": " + name + " is " + describe_tensor(t) +
                "; compute ops take device tensors");
  if (need < 0 || t.numel < need)
    throw Error(std::string("cpu ") + op + ": " + name + " is " + describe_tensor(t) +
                ", needs " + std::to_string(need) + " elements");
  if (need > 0 && t.data == nullptr)
    throw Error(std::string("cpu ") + op + ": " + name + " has no data");
}

}  // namespace

void check_float(const Tensor& t, const char* op, const char* name, std::int64_t need) {
  if (t.dtype != DType::F32 && t.dtype != DType::BF16)
    throw Error(std::string("cpu ") + op + ": " + name + " is " + describe_tensor(t) +
                ", expected f32 or bf16");
  check_common(t, op, name, need);
}

void check_dtype(const Tensor& t, DType dt, const char* op, const char* name, std::int64_t need) {
  if (t.dtype != dt)
    throw Error(std::string("cpu ") + op + ": " + name + " is " + describe_tensor(t) +
                ", expected " + to_string(dt));
  check_common(t, op, name, need);
}

void check_dims(const AttnDims& a, const char* op) {
  if (a.B <= 0 || a.S <= 0 || a.heads <= 0 || a.kv_heads <= 0 || a.d <= 0 || a.dv < 0 ||
      a.heads % a.kv_heads != 0)
    throw Error(std::string("cpu ") + op + ": bad attention dims B=" + std::to_string(a.B) +
                " S=" + std::to_string(a.S) + " heads=" + std::to_string(a.heads) +
                " kv_heads=" + std::to_string(a.kv_heads) + " d=" + std::to_string(a.d) + " dv=" + std::to_string(a.dv));
  if (a.window < 0 || a.chunk < 0 || (a.window > 0 && a.chunk > 0) || !(a.softcap >= 0.0f) || !std::isfinite(a.softcap))
    throw Error(std::string("cpu ") + op + ": window and chunk must be >= 0 (not both set) and softcap finite and >= 0, got window=" +
                std::to_string(a.window) + " chunk=" + std::to_string(a.chunk) + " softcap=" + std::to_string(a.softcap));
}

void ensure_blas_threads(int threads) {
  std::shared_lock lock(fork_guard());  // OpenBLAS restarts its threads (core/util/fork_guard.h)
  if (openblas_get_num_threads() != threads) openblas_set_num_threads(threads);
}

void stage_kv_head(FV qkv, std::int64_t row_width, std::int64_t col, int b, int S, int d,
                   float* out) {
  for (int s = 0; s < S; ++s)
    widen(qkv, (static_cast<std::int64_t>(b) * S + s) * row_width + col,
          out + static_cast<std::int64_t>(s) * d, d);
}

void add_head(const float* in, FV t, std::int64_t row_width, std::int64_t col, int b, int S,
              int d) {
  for (int s = 0; s < S; ++s)
    narrow(in + static_cast<std::int64_t>(s) * d, t,
           (static_cast<std::int64_t>(b) * S + s) * row_width + col, d, true);
}

}  // namespace cpu

using cpu::FV;

CpuBackend::CpuBackend(int threads) : threads_(threads == 0 ? 2 : threads) {
  if (threads_ < 1) throw Error("cpu backend: threads must be >= 0, got " + std::to_string(threads));
  cpu::ensure_blas_threads(1);  // GEMMs are split over the pool, one OpenBLAS thread a lane
  pool_ = std::make_unique<cpu::ThreadPool>(threads_);
}

CpuBackend::~CpuBackend() = default;

int CpuBackend::threads() const { return threads_; }

MemoryResource& CpuBackend::memory(Space s) { return s == Space::Device ? device_ : host_; }

void CpuBackend::set_workspace(const Tensor& ws) { ws_ = ws; }

std::uint64_t CpuBackend::available_memory() const { return host_memory_available(); }

std::vector<std::pair<std::string, std::string>> CpuBackend::describe() const {
  std::vector<std::pair<std::string, std::string>> d;
  const char* cfg = openblas_get_config();
  d.emplace_back("blas", cfg ? cfg : "unknown");
  d.emplace_back("threads", std::to_string(threads_));
  d.emplace_back("blas_threads", "1");  // per lane: each GEMM is split over the pool (cpu_gemm_parts.h)
  d.emplace_back("simd_target", cpu::simd::active_name());
  d.emplace_back("host_heap", host_heap_mode());  // HeapMemory: freed memory kept or trimmed
  d.emplace_back("gemm", cpu::gemm_path_name());  // bf16 GEMMs: oneDNN or widened to sgemm
  std::string model = "unknown";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        model = line.substr(colon + 1);
        model.erase(0, model.find_first_not_of(" \t"));
      }
      break;
    }
  }
  d.emplace_back("cpu", model);
  d.emplace_back("cpu_cores", std::to_string(std::thread::hardware_concurrency()));
  return d;
}

std::uint64_t CpuBackend::workspace_bytes(const ModelConfig& m) const {
  const bool bf = m.dtype == DType::BF16;
  const std::int64_t tokens = m.tokens();
  std::uint64_t need = 0;
  auto take = [&](std::uint64_t b) { need = std::max(need, b); };
  const BlockGraph graph(m);
  const MoeDims moe = moe_dims(m);
  for (int ti = 0; ti < graph.table_count(); ++ti)
  for (const StepDef& s : graph.table(ti).steps()) {
    switch (s.op) {
      case OpKind::Linear:
        take(ws_linear_fwd(s.M, s.K, s.N, bf));
        take(ws_linear_bwd(s.M, s.K, s.N, bf));
        break;
      case OpKind::ExpertLinear: {  // one expert's rows at a time: at most its capacity, or every token
        const std::int64_t rows = moe.capacity > 0 ? moe.capacity : moe.tokens;
        take(ws_linear_fwd(rows, s.K, s.N, bf));
        take(ws_linear_bwd(rows, s.K, s.N, bf));
        break;
      }
      case OpKind::MoeRoute:
        take(ws_moe_route(moe));
        break;
      case OpKind::LayerNorm:
      case OpKind::RmsNorm:
      case OpKind::QkNorm:
      case OpKind::QkHeadNorm:
        take(ws_norm_bwd(s.M));
        break;
      default:
        break;
    }
  }
  AttnDims a;
  a.B = m.batch;
  a.S = m.seq;
  a.heads = m.heads;
  a.kv_heads = m.kv_heads;
  a.d = m.head_dim();
  a.dv = m.mla.on() ? m.v_head_dim() : 0;
  if (m.position == PositionKind::Rope && !m.mla.on()) take(ws_rope(a));
  take(m.attention == AttentionImpl::Flash ? ws_flash(a) : ws_attention(a));
  take(ws_norm_bwd(tokens));  // the final norm
  take(ws_embedding_bwd(m.batch, m.seq, m.hidden, m.vocab));
  take(ws_head_loss(tokens, m.hidden, m.vocab, bf));
  return need;
}

// --- memory ops: any space ---

namespace {

// Bytes per part of a parallel memset or memcpy: below two parts the caller does it alone.
constexpr std::int64_t kMemGrain = std::int64_t{1} << 22;

}  // namespace

void CpuBackend::fill_zero(const Tensor& t) {
  if (!t.data || t.numel <= 0) return;
  char* p = static_cast<char*>(t.data);
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(t.bytes()), kMemGrain,
                    [&](std::int64_t b, std::int64_t e, int) { std::memset(p + b, 0, e - b); });
}

void CpuBackend::copy(const Tensor& dst, const Tensor& src) {
  if (dst.dtype != src.dtype || dst.numel != src.numel)
    throw Error("cpu copy: dst " + cpu::describe_tensor(dst) + " and src " +
                cpu::describe_tensor(src) + " differ");
  if (dst.numel <= 0 || dst.data == src.data) return;
  const auto d = reinterpret_cast<std::uintptr_t>(dst.data), s = reinterpret_cast<std::uintptr_t>(src.data);
  const std::uintptr_t n = dst.bytes();
  if (d < s + n && s < d + n) {  // overlapping: one memmove
    std::memmove(dst.data, src.data, n);
    return;
  }
  copy_bytes(dst.data, src.data, n);
}

void CpuBackend::copy_bytes(void* dst, const void* src, std::uint64_t n) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  cpu::parallel_for(*pool_, static_cast<std::int64_t>(n), kMemGrain,
                    [&](std::int64_t b, std::int64_t e, int) { std::memcpy(d + b, s + b, e - b); });
}

void CpuBackend::read(const Tensor& src, std::vector<float>& out) {
  out.resize(static_cast<std::size_t>(src.numel));
  switch (src.dtype) {
    case DType::F32:
    case DType::BF16: {
      FV s(src);
      for (std::int64_t i = 0; i < src.numel; ++i) out[static_cast<std::size_t>(i)] = s[i];
      break;
    }
    case DType::U8:
      for (std::int64_t i = 0; i < src.numel; ++i)
        out[static_cast<std::size_t>(i)] = static_cast<const std::uint8_t*>(src.data)[i];
      break;
    case DType::I32:
      for (std::int64_t i = 0; i < src.numel; ++i)
        out[static_cast<std::size_t>(i)] =
            static_cast<float>(static_cast<const std::int32_t*>(src.data)[i]);
      break;
  }
}

void CpuBackend::read_bytes(const Tensor& src, void* out) {
  if (src.numel > 0) copy_bytes(out, src.data, src.bytes());
}

void CpuBackend::write_bytes(const Tensor& dst, const void* in) {
  if (dst.numel > 0) copy_bytes(dst.data, in, dst.bytes());
}

}  // namespace remat

namespace remat {

void CpuBackend::run(OpKind op, Pass pass, const OpArgs& args) {
  switch (op) {
#define OP(id, ...)                                                   \
  case OpKind::id:                                                    \
    if (pass == Pass::Forward) fwd_##id(args); else bwd_##id(args); \
    return;
#include "core/graph/ops.def"
#undef OP
  }
  throw Error("cpu: unknown op " + std::to_string(static_cast<int>(op)));
}

}  // namespace remat
