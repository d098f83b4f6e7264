#include "core/engine/model_state.h"

#include <cmath>

#include "core/util/bf16.h"
#include "core/util/hash.h"
#include "core/util/philox.h"

namespace remat {

ModelState::ModelState(const ModelConfig& m, Backend& backend, TrackingAllocator& alloc)
    : cfg_(m), layout_(m), backend_(backend), alloc_(alloc) {
  const std::int64_t n = layout_.total();
  alloc_.set_phase(Phase::Init);
  params = alloc_.allocate(m.dtype, n, {Category::Parameters, -1, "params"});
  grads = alloc_.allocate(m.dtype, n, {Category::Gradients, -1, "grads"});
  if (m.dtype != DType::F32)
    master = alloc_.allocate(DType::F32, n, {Category::MasterWeights, -1, "master"});
  this->m = alloc_.allocate(DType::F32, n, {Category::OptimizerState, -1, "adam.m"});
  v = alloc_.allocate(DType::F32, n, {Category::OptimizerState, -1, "adam.v"});
  std::uint64_t ws = backend_.workspace_bytes(m);
  if (ws > 0) {
    workspace = alloc_.allocate(DType::U8, static_cast<std::int64_t>(ws),
                                {Category::Workspace, -1, "workspace"});
    backend_.set_workspace(workspace);
  }
  tokens = alloc_.allocate(DType::I32, m.tokens(), {Category::Workspace, -1, "batch.tokens"});
  targets = alloc_.allocate(DType::I32, m.tokens(), {Category::Workspace, -1, "batch.targets"});
  if (backend_.computes()) {
    backend_.fill_zero(this->m);
    backend_.fill_zero(v);
    backend_.fill_zero(grads);
  }
}

ModelState::~ModelState() {
  for (Tensor* t : {&targets, &tokens, &workspace, &v, &m, &master, &grads, &params})
    if (t->id) alloc_.free(*t);
}

Tensor ModelState::param(int block, ParamSlot s) const {
  std::int64_t off = layout_.offset(block, s);
  return off < 0 ? Tensor{} : params.slice(off, layout_.numel(block, s));
}

Tensor ModelState::grad(int block, ParamSlot s) const {
  std::int64_t off = layout_.offset(block, s);
  return off < 0 ? Tensor{} : grads.slice(off, layout_.numel(block, s));
}

void ModelState::init_weights(std::uint64_t seed) {
  if (!backend_.computes()) return;
  std::vector<float> host(static_cast<std::size_t>(layout_.total()));
  const float base = 0.02f, resid = 0.02f / std::sqrt(2.0f * static_cast<float>(cfg_.layers));
  for (std::size_t pi = 0; pi < layout_.params().size(); ++pi) {
    const ParamSpec& p = layout_.params()[pi];
    float* out = host.data() + p.offset;
    if (p.cols == 1) {  // vectors: norm weights 1, biases 0
      bool is_weight = p.name.size() >= 2 && p.name.compare(p.name.size() - 2, 2, ".w") == 0;
      for (std::int64_t i = 0; i < p.numel(); ++i) out[i] = is_weight ? 1.0f : 0.0f;
      continue;
    }
    bool residual_proj = p.name.find("attn.proj.w") != std::string::npos ||
                         p.name.find("mlp.fc2.w") != std::string::npos;
    float stddev = residual_proj ? resid : base;
    DropoutKey key{seed, 0xFFFFFFFFu, static_cast<std::uint32_t>(pi), 0x5EED};
    for (std::int64_t i = 0; i < p.numel(); i += 2) {
      // Box-Muller on two uniform draws from the counter-based generator.
      float u1 = (static_cast<float>(philox_bits(key, static_cast<std::uint64_t>(i))) + 1.0f) /
                 4294967296.0f;
      float u2 = static_cast<float>(philox_bits(key, static_cast<std::uint64_t>(i) + 1)) /
                 4294967296.0f;
      float r = std::sqrt(-2.0f * std::log(u1)), th = 6.2831853f * u2;
      out[i] = stddev * r * std::cos(th);
      if (i + 1 < p.numel()) out[i + 1] = stddev * r * std::sin(th);
    }
  }
  write_params(host);
}

void ModelState::write_params(const std::vector<float>& values) {
  if (!backend_.computes()) return;
  if (cfg_.dtype == DType::F32) {
    backend_.write_bytes(params, values.data());
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
