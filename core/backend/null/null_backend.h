// The simulator's backend: memory is virtual and no op computes anything, so the executor's
// walk of a schedule yields the exact allocation sequence, peak and FLOPs of a real run.
#pragma once
#include "core/backend/backend.h"

namespace remat {

class NullBackend : public Backend {
 public:
  // `mirror` supplies the workspace size of the backend being simulated.
  explicit NullBackend(const Backend* mirror = nullptr) : mirror_(mirror) {}
  std::string name() const override { return "null"; }
  bool computes() const override { return false; }
  MemoryResource& memory(Space s) override { return s == Space::Device ? device_ : host_; }
  std::uint64_t workspace_bytes(const ModelConfig& m) const override {
    return mirror_ ? mirror_->workspace_bytes(m) : 0;
  }
  void set_workspace(const Tensor&) override {}

  void run(OpKind, Pass, const OpArgs&) override {}  // every block op: nothing to compute
  void fill_zero(const Tensor&) override {}
  void copy(const Tensor&, const Tensor&) override {}
  void add_into(const Tensor&, const Tensor&) override {}
  void read(const Tensor& src, std::vector<float>& out) override {
    out.assign(static_cast<std::size_t>(src.numel), 0.0f);
  }
  void read_bytes(const Tensor&, void*) override {}
  void write_bytes(const Tensor&, const void*) override {}
  void embedding_fwd(const Tensor&, const Tensor&, const Tensor*, const Tensor&, int, int, int,
                     float) override {}
  void embedding_bwd(const Tensor&, const Tensor&, const Tensor&, const Tensor*, int, int, int,
                     float) override {}
  void layernorm_fwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, std::int64_t, int, float) override {}
  void layernorm_bwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                     const Tensor&, std::int64_t, int, float, bool) override {}
  void rmsnorm_fwd(const Tensor&, const Tensor&, const Tensor&, std::int64_t, int, float,
                   float) override {}
  void rmsnorm_bwd(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                   std::int64_t, int, float, bool, float) override {}
  void qk_norm_sums(Pass, const OpArgs&, const Tensor&) override {}
  void qk_norm_split(Pass, const OpArgs&, const Tensor&, int, int) override {}
  void dropout_mask(const Tensor&, const DropoutKey&, float, std::int64_t) override {}
  void dropout_fwd(const Tensor&, const Tensor&, const Tensor&, float, std::int64_t) override {}
  void dropout_bwd(const Tensor&, const Tensor&, const Tensor&, float, std::int64_t, bool) override {}
  void moe_aux_loss(const Tensor&, int, int, std::int64_t, double, double) override {}
  void head_loss(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                 const Tensor&, std::int64_t, int, int, float, float, float) override {}
  void adamw(const Tensor&, const Tensor&, const Tensor*, const Tensor&, const Tensor&,
             const std::vector<AdamSegment>&, const AdamArgs&) override {}
  void cast(const Tensor&, const Tensor&) override {}

 private:
  const Backend* mirror_;
  VirtualMemory device_, host_;
};

}  // namespace remat
