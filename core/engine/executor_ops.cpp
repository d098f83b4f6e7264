// One step of the block table, forward or backward: its tensors, parameters and constants
// gathered into the op table's arguments and handed to the backend.
#include "core/engine/executor.h"

#include "core/backend/moe_aux.h"
#include "core/backend/moe_rows.h"
#include "core/engine/data_parallel.h"
#include "core/util/error.h"

namespace remat {

OpArgs Executor::op_args(int b, const StepDef& s, const std::vector<Tensor>& t,
                         OpParams& params) const {
  OpArgs a;
  if (s.in.size() > OpArgs::kMaxIn || s.out.size() > OpArgs::kMaxOut)
    throw Error("step " + s.name + " has more tensors than an op takes");
  for (std::size_t k = 0; k < s.in.size(); ++k) a.in[k] = t[s.in[k]] ? &t[s.in[k]] : nullptr;
  for (std::size_t k = 0; k < s.out.size(); ++k) a.out[k] = &t[s.out[k]];
  params = {};
  if (!s.w.empty()) params[0] = param_at(b, s.w);
  if (!s.b.empty()) params[1] = param_at(b, s.b);
  a.w = params[0] ? &params[0] : nullptr;
  a.b = params[1] ? &params[1] : nullptr;
  a.M = s.M;
  a.K = s.K;
  a.N = s.N;
  a.eps = static_cast<float>(cfg_.norm_eps);
  a.w_offset = s.w_offset;
  a.p = static_cast<float>(dropout_at(s.site));
  if (s.op == OpKind::Residual) a.branch_mult = static_cast<float>(cfg_.residual_multiplier);
  if (s.op == OpKind::SwiGluClamped) a.limit = static_cast<float>(cfg_.swiglu_limit);
  a.key = key(b, s.site);
  a.attn = attn(b);
  a.rope = rope_table(b);
  if (cfg_.moe.on()) a.moe = moe_dims(cfg_);
  if (s.op == OpKind::MoeRoute && aux_) {  // forward: the layer's statistics (backward: the gradient)
    const MoeAuxLayout L{aux_layers(), cfg_.moe.experts};
    params[2] = aux_.slice(L.stats(aux_layer(b)), 2 * static_cast<std::int64_t>(cfg_.moe.experts));
    a.aux = &params[2];
  }
  return a;
}

int Executor::aux_layer(int b) const {
  int n = 0;
  for (int j = pp_ > 1 ? 0 : first_block_; j < first_block_ + b; ++j) n += cfg_.moe_in(j);
  return n;
}

int Executor::aux_layers() const { return aux_layer(model_blocks_ - first_block_); }

// The load-balancing loss of the micro-batch, once every block has run its forward.
void Executor::aux_loss() {
  if (!aux_) return;
  const int layers = aux_layers(), E = cfg_.moe.experts;
  const std::int64_t T = cfg_.tokens();
  // (Its few FLOPs, like the statistics' in each moe.route, are left out of the counts.)
  op("moe.aux_loss", "moe_aux_loss", -1, 0, aux_.bytes(), Stream::Compute, [&] {
    be_.moe_aux_loss(aux_, layers, E, T, cfg_.moe.aux_loss_coef,
                     1.0 / static_cast<double>(micros_ * replicas_of(opt_.comm)));
  });
}

double Executor::dropout_at(DropoutSite site) const {
  switch (site) {
    case kSiteEmbedding: return cfg_.drops(kDropEmbedding) ? cfg_.dropout : 0.0;
    case kSiteAttentionProbs: return cfg_.drops(kDropAttention) ? cfg_.dropout : 0.0;
    case kSiteAttentionResidual:
    case kSiteMlpResidual: return cfg_.drops(kDropResidual) ? cfg_.dropout : 0.0;
  }
  return 0.0;
}

void Executor::run_forward_step(int b, const StepDef& s, const std::vector<Tensor>& t) {
  if (tp_ > 1 && s.op == OpKind::Linear) return tp_linear_forward(b, s, t);
  if (tp_ > 1 && s.op == OpKind::QkNorm) return tp_qk_norm_forward(b, s, t);
  OpParams params;
  const OpArgs a = op_args(b, s, t, params);
  op("h" + std::to_string(b) + "." + s.name, s.name, b, s.fwd_flops(graph_.windowed(b)),
     step_bytes(b, s), Stream::Compute, [&] { be_.run(s.op, Pass::Forward, a); });
  if (s.op == OpKind::MoeRoute && keep_routing_ && phase_ == Phase::Forward && be_.computes() && out_)
    record_routing(b, t[s.out[1]]);
}

void Executor::record_routing(int b, const Tensor& table) {
  const MoeDims d = moe_dims(cfg_);
  const MoeTable L(d);
  std::vector<std::int32_t> v(static_cast<std::size_t>(L.entries));
  be_.read_bytes(table, v.data());
  std::vector<std::uint64_t> routed(static_cast<std::size_t>(d.experts), 0);
  for (std::int64_t i = 0; i < L.row; ++i) {
    const std::int32_t e = v[static_cast<std::size_t>(i)];
    if (e < 0 || e >= d.experts)
      throw Error("block " + std::to_string(first_block_ + b) + " moe.route: choice " + std::to_string(i) +
                  " names expert " + std::to_string(e) + " of " + std::to_string(d.experts));
    ++routed[static_cast<std::size_t>(e)];
  }
  for (int e = 0; e < d.experts; ++e)
    out_->routing.push_back({micro_, first_block_ + b, e, routed[static_cast<std::size_t>(e)],
                             static_cast<std::uint64_t>(v[static_cast<std::size_t>(L.count + e)])});
}

void Executor::run_backward_step(int b, const StepDef& s, const std::vector<Tensor>& t,
                                 const std::vector<Tensor>& g, const std::vector<bool>& acc) {
  OpParams params;
  OpArgs a = op_args(b, s, t, params);
  Tensor dW = grad_at(b, s.w);
  Tensor dB = grad_at(b, s.b);
  a.dw = dW ? &dW : nullptr;
  a.db = dB ? &dB : nullptr;
  if (a.aux) {  // the loss's gradient per probability, the same for every MoE layer
    const MoeAuxLayout L{aux_layers(), cfg_.moe.experts};
    params[2] = aux_.slice(L.grad(), cfg_.moe.experts);
  }
  for (std::size_t k = 0; k < s.in.size(); ++k) {
    a.din[k] = g[s.in[k]] ? &g[s.in[k]] : nullptr;
    a.acc[k] = acc[k];
  }
  for (std::size_t k = 0; k < s.out.size(); ++k) a.dout[k] = g[s.out[k]] ? &g[s.out[k]] : nullptr;
  be_.run(s.op, Pass::Backward, a);
}

}  // namespace remat
