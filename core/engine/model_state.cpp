#include "core/engine/model_state.h"

#include <algorithm>
#include <memory>

#include "core/engine/weight_init.h"
#include "core/util/bf16.h"
#include "core/util/hash.h"

namespace remat {

ModelState::ModelState(const ModelConfig& m, Backend& backend, TrackingAllocator& alloc)
    : ModelState(m, backend, alloc, ZeroShard{}) {}

ModelState::ModelState(const ModelConfig& m, Backend& backend, TrackingAllocator& alloc, ZeroShard zero)
    : ModelState(m, backend, alloc, zero, LayoutParts{}) {}

ModelState::ModelState(const ModelConfig& m, Backend& backend, TrackingAllocator& alloc, ZeroShard zero,
                       LayoutParts parts)
    : cfg_(m), layout_(m, parts), zero_(zero), backend_(backend), alloc_(alloc) {
  const std::int64_t n = layout_.total();
  zero_.total = n;
  const std::int64_t c = zero_.shard();
  alloc_.set_phase(Phase::Init);
  params = alloc_.allocate(m.dtype, zero_.parameters() ? c : n, {Category::Parameters, -1, "params"});
  grads = alloc_.allocate(m.dtype, zero_.gradients() ? c : n, {Category::Gradients, -1, "grads"});
  const std::int64_t opt = zero_.optimizer() ? c : n;
  if (m.dtype != DType::F32)
    master = alloc_.allocate(DType::F32, opt, {Category::MasterWeights, -1, "master"});
  this->m = alloc_.allocate(DType::F32, opt, {Category::OptimizerState, -1, "adam.m"});
  v = alloc_.allocate(DType::F32, opt, {Category::OptimizerState, -1, "adam.v"});
  std::uint64_t ws = backend_.workspace_bytes(m);
  if (ws > 0) {
    workspace = alloc_.allocate(DType::U8, static_cast<std::int64_t>(ws),
                                {Category::Workspace, -1, "workspace"});
    backend_.set_workspace(workspace);
  }
  tokens = alloc_.allocate(DType::I32, m.tokens(), {Category::Workspace, -1, "batch.tokens"});
  targets = alloc_.allocate(DType::I32, m.tokens(), {Category::Workspace, -1, "batch.targets"});
  // Nothing is written here: each step's "batch" op zeroes the gradients, and the first AdamW
  // step takes the moments as zeros without reading them (moments_zero), so their pages are
  // first touched by the writes that give them values.
}

ModelState::~ModelState() {
  for (Tensor* t : {&targets, &tokens, &workspace, &v, &m, &master, &grads, &params})
    if (t->id) alloc_.free(*t);
}

Tensor ModelState::param(int block, const std::string& local) const {
  std::int64_t off = layout_.offset(block, local);
  return off < 0 ? Tensor{} : params.slice(off, layout_.numel(block, local));
}

Tensor ModelState::grad(int block, const std::string& local) const {
  std::int64_t off = layout_.offset(block, local);
  return off < 0 ? Tensor{} : grads.slice(off, layout_.numel(block, local));
}

void ModelState::init_weights(std::uint64_t seed) {
  if (!backend_.computes()) return;
  if (master_sharded()) {  // ZeRO-1/2 in 16 bits: whole parameters, a shard of master weights
    std::vector<float> all(static_cast<std::size_t>(layout_.total()));
    init_weight_values(layout_, cfg_.layers, seed, all.data(), backend_.host_threads(), nullptr);
    write_params(all);
    return;
  }
  // fp32 values: straight into the fp32 tensor where the host can reach it, else through a
  // host buffer. bf16 parameters are then the rounded master weights.
  // Where the host reaches the tensors, bf16 parameters are rounded in the same pass.
  const Tensor& dst = master.id ? master : params;
  const bool direct = backend_.host_addressable();
  const bool fused_bf16 = direct && master.id && params.dtype == DType::BF16;
  std::unique_ptr<float[]> host;
  float* out = nullptr;
  if (direct) {
    out = dst.as<float>();
  } else {
    host.reset(new float[static_cast<std::size_t>(layout_.total())]);
    out = host.get();
  }
  init_weight_values(layout_, cfg_.layers, seed, out, backend_.host_threads(),
                     fused_bf16 ? params.as<std::uint16_t>() : nullptr);
  if (host) backend_.write_bytes(dst, out);
  if (master.id && !fused_bf16) backend_.cast(params, master);
  backend_.synchronize();
}

void ModelState::write_params(const std::vector<float>& values) {
  if (!backend_.computes()) return;
  if (cfg_.dtype == DType::F32) {
    backend_.write_bytes(params, values.data());
  } else if (master_sharded()) {
    // The parameters rounded from all the values, as cast() rounds; the master weights this
    // rank's shard of them, zeros past the end.
    std::vector<bf16_bits> p(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = float_to_bf16(values[i]);
    backend_.write_bytes(params, p.data());
    std::vector<float> mine(static_cast<std::size_t>(master.numel), 0.0f);
    std::copy_n(values.begin() + zero_.begin(), zero_.count(), mine.begin());
    backend_.write_bytes(master, mine.data());
  } else {
    backend_.write_bytes(master, values.data());
    backend_.cast(params, master);
  }
  backend_.synchronize();
}

std::vector<float> ModelState::read_params() const {
  std::vector<float> out;
  backend_.read(master.id ? master : params, out);
  return out;
}

std::vector<float> ModelState::read_grads() const {
  std::vector<float> out;
  backend_.read(grads, out);
  return out;
}

std::uint64_t ModelState::grad_checksum() const {
  std::vector<unsigned char> bytes(grads.bytes());
  backend_.read_bytes(grads, bytes.data());
  Fnv1a64 h;
  h.update(bytes.data(), bytes.size());
  return h.value();
}

std::vector<AdamSegment> ModelState::adam_segments() const {
  std::vector<AdamSegment> s;
  for (const auto& p : layout_.params()) s.push_back({p.offset, p.numel(), p.decay});
  return s;
}

std::uint64_t ModelState::static_bytes() const {
  std::uint64_t b = 0;
  for (const Tensor* t : {&params, &grads, &master, &m, &v}) b += t->bytes();
  return b;
}

}  // namespace remat
