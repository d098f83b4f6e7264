// CudaBackend: setup, streams, memory ops, workspace sizing and provenance.
#include "core/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda_sizing.h"
#include "core/backend/cuda/gemm.h"
#include "core/util/bf16.h"
#include "core/util/error.h"
#include "kernels/attn_softmax.cuh"
#include "kernels/embedding.cuh"

namespace remat::cuda {

namespace {

std::string version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace

CudaBackend::CudaBackend(int device) : device_(device) {
  int count = 0;
  REMAT_CUDA(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    throw Error("cuda: device " + std::to_string(device) + " does not exist (" +
                std::to_string(count) + " visible)");
  REMAT_CUDA(cudaSetDevice(device_));
  REMAT_CUDA(cudaGetDeviceProperties(&props_, device_));
  if (props_.major < 9)
    throw Error("cuda: device " + std::to_string(device) + " (" + props_.name +
                ") has compute capability " + std::to_string(props_.major) + "." +
                std::to_string(props_.minor) + "; this build has kernels for 9.0 and newer");
  REMAT_CUDA(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  REMAT_CUDA(cudaStreamCreateWithFlags(&to_host_, cudaStreamNonBlocking));
  REMAT_CUDA(cudaStreamCreateWithFlags(&to_device_, cudaStreamNonBlocking));
  REMAT_CUDA(cudaEventCreateWithFlags(&copy_join_, cudaEventDisableTiming));
  device_pool_ = std::make_unique<CachingPool>(CachingPool::Kind::Device, device_, compute_);
  host_pool_ = std::make_unique<CachingPool>(CachingPool::Kind::PinnedHost, device_, compute_);
  gemm_ = std::make_unique<Gemm>(compute_);
  if (const char* e = std::getenv("REMAT_FLASH_IMPL")) {
    const std::string v = e;
    if (v == "scalar") flash_impl_ = kernels::FlashImpl::Scalar;
    else if (v == "tc") flash_impl_ = kernels::FlashImpl::TensorCore;
    else if (v == "auto" || v.empty()) flash_impl_ = kernels::FlashImpl::Auto;
    else throw Error("REMAT_FLASH_IMPL must be auto, scalar or tc, got '" + v + "'");
  }
  if (const char* e = std::getenv("REMAT_ATTN_PROBS")) {
    const std::string v = e;
    if (v == "fused" || v.empty()) fused_probs_ = true;
    else if (v == "gemm") fused_probs_ = false;
    else throw Error("REMAT_ATTN_PROBS must be fused or gemm, got '" + v + "'");
  }
  if (const char* e = std::getenv("REMAT_FLASH_ROWS")) {
    const std::string v = e;
    if (v == "16" || v.empty()) flash_row_groups_ = 1;
    else if (v == "32") flash_row_groups_ = 2;
    else throw Error("REMAT_FLASH_ROWS must be 16 or 32, got '" + v + "'");
  }
  head_chunk_bytes_ = cuda_head_chunk_bytes_from_env();
}

CudaBackend::~CudaBackend() {
  // Let queued work finish before memory and handles go away; errors are ignored here.
  cudaSetDevice(device_);
  if (compute_) cudaStreamSynchronize(compute_);
  for (cudaStream_t c : {to_host_, to_device_})
    if (c) cudaStreamSynchronize(c);
  gemm_.reset();
  host_pool_.reset();
  device_pool_.reset();
  if (copy_join_) cudaEventDestroy(copy_join_);
  for (cudaStream_t c : {to_host_, to_device_})
    if (c) cudaStreamDestroy(c);
  if (compute_) cudaStreamDestroy(compute_);
  cudaGetLastError();
}

void CudaBackend::activate() const {
  int cur = -1;
  REMAT_CUDA(cudaGetDevice(&cur));
  if (cur != device_) REMAT_CUDA(cudaSetDevice(device_));
}

MemoryResource& CudaBackend::memory(Space s) {
  return s == Space::Device ? static_cast<MemoryResource&>(*device_pool_)
                            : static_cast<MemoryResource&>(*host_pool_);
}

std::int64_t CudaBackend::head_chunk_rows(std::int64_t rows, int V, std::size_t chunk_bytes) {
  return cuda_head_chunk_rows(rows, V, chunk_bytes);
}

std::uint64_t CudaBackend::workspace_bytes(const ModelConfig& m) const {
  // The embedding backward's scratch with CUB's sort storage as CUB gives it on this device.
  std::optional<std::size_t> embedding;
  try {
    activate();
    embedding = kernels::embedding_bwd_scratch_bytes(m.tokens());
  } catch (const Error&) {
  }
  return cuda_workspace_bytes(m, head_chunk_bytes_, embedding);
}

void CudaBackend::set_workspace(const Tensor& ws) {
  activate();
  if (!ws || ws.bytes() == 0) {
    ws_ = nullptr;
    ws_bytes_ = 0;
    gemm_->set_workspace(nullptr, 0);
    return;
  }
  if (ws.space != Space::Device) throw Error("cuda set_workspace: the workspace must be device memory");
  char* base = static_cast<char*>(ws.data);
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(base);
  const std::size_t pad = (256 - a % 256) % 256;
  if (ws.bytes() < pad + kGemmWorkspace)
    throw Error("cuda set_workspace: " + std::to_string(ws.bytes()) +
                " bytes is less than the fixed GEMM workspace of " +
                std::to_string(kGemmWorkspace) + "; allocate workspace_bytes(model)");
  base += pad;
  gemm_->set_workspace(base, kGemmWorkspace);
  ws_ = base + kGemmWorkspace;
  ws_bytes_ = ws.bytes() - pad - kGemmWorkspace;
}

char* CudaBackend::scratch(std::size_t bytes, const char* op) const {
  if (bytes == 0) return ws_;
  if (!ws_ || bytes > ws_bytes_)
    throw Error(std::string("cuda ") + op + ": workspace too small (" +
                std::to_string(ws_bytes_) + " bytes of op scratch, needs " +
                std::to_string(bytes) + "); allocate workspace_bytes(model) and call set_workspace");
  return ws_;
}

void CudaBackend::check_stream_error(const char* op) const {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw Error(std::string("cuda ") + op + ": " + cudaGetErrorName(e) + ": " +
                cudaGetErrorString(e));
}

void CudaBackend::synchronize() {
  activate();
  sync_copies();
  REMAT_CUDA(cudaStreamSynchronize(compute_));
}

void CudaBackend::sync_copies() {
  REMAT_CUDA(cudaStreamSynchronize(to_host_));
  REMAT_CUDA(cudaStreamSynchronize(to_device_));
}

void CudaBackend::wait_for_copies(const Tensor& t) {
  for (const EventPtr& ev : device_pool_->pending_uses(t.data))
    REMAT_CUDA(cudaStreamWaitEvent(compute_, ev.get(), 0));
}

void CudaBackend::join_copies() {
  activate();
  REMAT_CUDA(cudaEventRecord(copy_join_, to_device_));
  REMAT_CUDA(cudaStreamWaitEvent(compute_, copy_join_, 0));
}

std::uint64_t CudaBackend::available_memory() const {
  activate();
  std::size_t free_b = 0, total_b = 0;
  REMAT_CUDA(cudaMemGetInfo(&free_b, &total_b));
  return free_b + device_pool_->cached_bytes();
}

std::vector<std::pair<std::string, std::string>> CudaBackend::describe() const {
  std::vector<std::pair<std::string, std::string>> d;
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
  cudaGetLastError();
  d.emplace_back("gpu", props_.name);
  d.emplace_back("device", std::to_string(device_));
  d.emplace_back("compute_capability",
                 std::to_string(props_.major) + "." + std::to_string(props_.minor));
  d.emplace_back("sm_count", std::to_string(props_.multiProcessorCount));
  d.emplace_back("gpu_memory_bytes", std::to_string(props_.totalGlobalMem));
  d.emplace_back("cuda_driver", version_string(driver));
  d.emplace_back("cuda_runtime", version_string(runtime));
  d.emplace_back("cublas", gemm_->cublas_version());
  d.emplace_back("cublaslt", gemm_->cublaslt_version());
  const char* impl = flash_impl_ == kernels::FlashImpl::Scalar       ? "scalar"
                     : flash_impl_ == kernels::FlashImpl::TensorCore ? "tensor cores"
                                                                     : "auto";
  d.emplace_back("flash_attention", impl);
  d.emplace_back("flash_query_rows_per_warp", std::to_string(16 * flash_row_groups_));
  d.emplace_back("naive_attention_probs", fused_probs_ ? "fused kernel (bf16, d 32/64/128)" : "cuBLAS scores + softmax");
  d.emplace_back("gemm_workspace_bytes", std::to_string(kGemmWorkspace));
  d.emplace_back("head_chunk_bytes", std::to_string(head_chunk_bytes_));
  return d;
}

// --- memory ops ---

void CudaBackend::fill_zero(const Tensor& t) {
  if (t.bytes() == 0) return;
  activate();
  if (t.space == Space::Device) {
    wait_for_copies(t);
    REMAT_CUDA(cudaMemsetAsync(t.data, 0, t.bytes(), compute_));
  } else {
    sync_copies();
    std::memset(t.data, 0, t.bytes());
  }
}

void CudaBackend::copy(const Tensor& dst, const Tensor& src) {
  if (dst.bytes() != src.bytes())
    throw Error("cuda copy: sizes differ (" + std::to_string(dst.bytes()) + " and " +
                std::to_string(src.bytes()) + " bytes)");
  if (dst.bytes() == 0) return;
  activate();
  if (dst.space == Space::Device && src.space == Space::Device) {
    wait_for_copies(dst);
    REMAT_CUDA(cudaMemcpyAsync(dst.data, src.data, dst.bytes(), cudaMemcpyDeviceToDevice, compute_));
    return;
  }
  // Host involved: on the stream of its direction, after everything issued to the compute
  // stream so far and after unfinished copies (on either stream) of the blocks it touches.
  cudaMemcpyKind kind = cudaMemcpyDefault;
  if (dst.space == Space::Host && src.space == Space::Device) kind = cudaMemcpyDeviceToHost;
  else if (dst.space == Space::Device && src.space == Space::Host) kind = cudaMemcpyHostToDevice;
  else kind = cudaMemcpyHostToHost;
  const cudaStream_t st = kind == cudaMemcpyHostToDevice ? to_device_ : to_host_;
  auto pool = [&](const Tensor& t) -> CachingPool& {
    return t.space == Space::Device ? *device_pool_ : *host_pool_;
  };
  EventPtr before = make_event();
  REMAT_CUDA(cudaEventRecord(before.get(), compute_));
  REMAT_CUDA(cudaStreamWaitEvent(st, before.get(), 0));
  for (const Tensor* t : {&dst, &src})
    for (const EventPtr& ev : pool(*t).pending_uses(t->data))
      REMAT_CUDA(cudaStreamWaitEvent(st, ev.get(), 0));
  // Memory the pools do not own has no record of its copies: order after the other stream.
  if (!pool(dst).owns(dst.data) || !pool(src).owns(src.data)) {
    EventPtr other = make_event();
    REMAT_CUDA(cudaEventRecord(other.get(), st == to_device_ ? to_host_ : to_device_));
    REMAT_CUDA(cudaStreamWaitEvent(st, other.get(), 0));
  }
  REMAT_CUDA(cudaMemcpyAsync(dst.data, src.data, dst.bytes(), kind, st));
  EventPtr done = make_event();
  REMAT_CUDA(cudaEventRecord(done.get(), st));
  // Freed blocks these touch are reused only after the copy finished.
  for (const Tensor* t : {&dst, &src}) pool(*t).record_use(t->data, done);
}

void CudaBackend::read_bytes(const Tensor& src, void* out) {
  const std::size_t n = src.bytes();
  if (n == 0) return;
  activate();
  if (src.space == Space::Device) {
    join_copies();
    REMAT_CUDA(cudaMemcpyAsync(out, src.data, n, cudaMemcpyDeviceToHost, compute_));
    REMAT_CUDA(cudaStreamSynchronize(compute_));
  } else {
    sync_copies();
    REMAT_CUDA(cudaStreamSynchronize(compute_));
    std::memcpy(out, src.data, n);
  }
}

void CudaBackend::write_bytes(const Tensor& dst, const void* in) {
  const std::size_t n = dst.bytes();
  if (n == 0) return;
  activate();
  if (dst.space == Space::Device) {
    sync_copies();  // an offload may still be reading dst
    REMAT_CUDA(cudaMemcpyAsync(dst.data, in, n, cudaMemcpyHostToDevice, compute_));
    REMAT_CUDA(cudaStreamSynchronize(compute_));
  } else {
    sync_copies();
    REMAT_CUDA(cudaStreamSynchronize(compute_));
    std::memcpy(dst.data, in, n);
  }
}

void CudaBackend::read(const Tensor& src, std::vector<float>& out) {
  const std::size_t n = static_cast<std::size_t>(std::max<std::int64_t>(src.numel, 0));
  out.assign(n, 0.0f);
  if (n == 0) return;
  std::vector<unsigned char> raw(src.bytes());
  read_bytes(src, raw.data());
  switch (src.dtype) {
    case DType::F32:
      std::memcpy(out.data(), raw.data(), n * 4);
      break;
    case DType::BF16:
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t b;
        std::memcpy(&b, raw.data() + 2 * i, 2);
        out[i] = bf16_to_float(b);
      }
      break;
    case DType::U8:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(raw[i]);
      break;
    case DType::I32:
      for (std::size_t i = 0; i < n; ++i) {
        std::int32_t v;
        std::memcpy(&v, raw.data() + 4 * i, 4);
        out[i] = static_cast<float>(v);
      }
      break;
  }
}

}  // namespace remat::cuda
