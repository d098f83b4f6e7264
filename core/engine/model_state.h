// The memory a model holds for the whole run: parameters, their gradients, fp32 master weights
// (bf16 models), AdamW moments, the backend's workspace and the batch. Allocated once, up front.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/engine/zero_shard.h"
#include "core/memory/tracking_allocator.h"
#include "core/model/param_layout.h"

namespace remat {

class ModelState {
 public:
  ModelState(const ModelConfig& m, Backend& backend, TrackingAllocator& alloc);
  // With ZeRO (zero_shard.h): what the stage shards holds this rank's shard buffer only
  // (zero.shard() elements), the rest the whole flat vector; `zero.total` is set here.
  ModelState(const ModelConfig& m, Backend& backend, TrackingAllocator& alloc, ZeroShard zero);
  // A pipeline stage's: only the parameters outside the blocks that `parts` names.
  ModelState(const ModelConfig& m, Backend& backend, TrackingAllocator& alloc, ZeroShard zero,
             LayoutParts parts);
  ~ModelState();
  ModelState(const ModelState&) = delete;
  ModelState& operator=(const ModelState&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }
  const ZeroShard& zero() const { return zero_; }

  Tensor param(std::int64_t offset, std::int64_t numel) const { return params.slice(offset, numel); }
  Tensor grad(std::int64_t offset, std::int64_t numel) const { return grads.slice(offset, numel); }
  // A block parameter by its name in the block (ParamSpec::local); empty if it has none.
  Tensor param(int block, const std::string& local) const;
  Tensor grad(int block, const std::string& local) const;
  bool has(int block, const std::string& local) const { return layout_.offset(block, local) >= 0; }

  // GPT-2 style initialization keyed by seed: N(0, 0.02), residual projections scaled by
  // 1/sqrt(2L), biases 0, norm weights 1.
  void init_weights(std::uint64_t seed);
  // Host copies of the parameters as fp32, in layout order (for saving and tests).
  std::vector<float> read_params() const;
  std::vector<float> read_grads() const;  // as fp32, in the layout's order
  void write_params(const std::vector<float>& values);
  // FNV-1a over the bits of every gradient.
  std::uint64_t grad_checksum() const;
  std::vector<AdamSegment> adam_segments() const;

  // Sharded buffers hold this rank's shard: read_params, read_grads and grad_checksum then see
  // the shard, param() and grad() views into it are not the model's. With 16-bit parameters
  // under ZeRO-1 and 2 the master weights are sharded and the parameters whole: read_params
  // reads the master shard, write_params takes all the values (the master keeps its shard).
  bool master_sharded() const { return master.id && master.numel != params.numel; }
  // Bytes held by each part (16 per parameter for bf16: 2 + 2 + 4 + 4 + 4).
  std::uint64_t static_bytes() const;

  Tensor params, grads, master, m, v, workspace, tokens, targets;
  // True until the first optimizer step: m and v are zeros by definition but not written
  // (AdamArgs::zero_moments), and grads hold nothing until a step's "batch" op zeroes them.
  bool moments_zero = true;

 private:
  ModelConfig cfg_;
  ParamLayout layout_;
  ZeroShard zero_;
  Backend& backend_;
  TrackingAllocator& alloc_;
};

}  // namespace remat
