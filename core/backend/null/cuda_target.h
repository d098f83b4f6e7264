// The CUDA backend as a plan sees it on a machine without a GPU: nothing runs, and its workspace
// is sized by the CUDA backend's own rules (cuda_sizing.h), so `plan --device cuda` predicts
// what a CUDA rank allocates. Named "cuda": the simulator then also predicts the caching
// allocator's reserved bytes.
#pragma once
#include "core/backend/cuda_sizing.h"
#include "core/backend/null/null_backend.h"

namespace remat {

class CudaTarget final : public NullBackend {
 public:
  std::string name() const override { return "cuda"; }
  // The head chunk as the CUDA backend reads it (REMAT_HEAD_CHUNK_MIB); Error for a bad value.
  std::uint64_t workspace_bytes(const ModelConfig& m) const override {
    return cuda_workspace_bytes(m, cuda_head_chunk_bytes_from_env());
  }
};

}  // namespace remat
