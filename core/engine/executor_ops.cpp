// One step of the block table, forward or backward, mapped onto the backend's ops.
#include "core/engine/executor.h"
#include "core/util/error.h"

namespace remat {

void Executor::run_forward_step(int b, const StepDef& s, const std::vector<Tensor>& t) {
  const float eps = static_cast<float>(cfg_.norm_eps), p = static_cast<float>(cfg_.dropout);
  const AttnDims a = attn();
  Tensor W = s.w != ParamSlot::Count ? st_.param(b, s.w) : Tensor{};
  Tensor B = s.b != ParamSlot::Count ? st_.param(b, s.b) : Tensor{};
  auto in = [&](std::size_t k) -> const Tensor& { return t[s.in[k]]; };
  auto out = [&](std::size_t k) -> const Tensor& { return t[s.out[k]]; };
  op("h" + std::to_string(b) + "." + s.name, s.name, b, s.flops_fwd, step_bytes(s),
     Stream::Compute, [&] {
       switch (s.op) {
         case OpKind::LayerNorm: be_.layernorm_fwd(in(0), W, B, out(0), s.M, s.K, eps); break;
         case OpKind::RmsNorm: be_.rmsnorm_fwd(in(0), W, out(0), s.M, s.K, eps); break;
         case OpKind::Linear: be_.linear_fwd(in(0), W, B ? &B : nullptr, out(0), s.M, s.K, s.N); break;
         case OpKind::Rope: be_.rope_fwd(in(0), out(0), a, static_cast<float>(cfg_.rope_theta)); break;
         case OpKind::AttnSoftmax: be_.attn_softmax_fwd(in(0), out(0), a); break;
         case OpKind::DropoutMask: be_.dropout_mask(out(0), key(b, s.site), p, s.M); break;
         case OpKind::AttnDropout: be_.dropout_fwd(in(0), in(1), out(0), p, s.M); break;
         case OpKind::AttnPV: be_.attn_pv_fwd(in(0), in(1), out(0), a); break;
         case OpKind::FlashAttn:
           be_.flash_fwd(in(0), out(0), out(1), a, key(b, kSiteAttentionProbs), p);
           break;
         case OpKind::Residual:
           be_.residual_fwd(in(0), in(1), s.in.size() > 2 ? &in(2) : nullptr, out(0), p, s.M);
           break;
         case OpKind::Gelu: be_.gelu_fwd(in(0), out(0), s.M); break;
         case OpKind::SwiGlu: be_.swiglu_fwd(in(0), out(0), s.M, s.K); break;
       }
     });
}

void Executor::run_backward_step(int b, const StepDef& s, const std::vector<Tensor>& t,
                                 const std::vector<Tensor>& g, const std::vector<bool>& acc) {
  const float eps = static_cast<float>(cfg_.norm_eps), p = static_cast<float>(cfg_.dropout);
  const AttnDims a = attn();
  Tensor W = s.w != ParamSlot::Count ? st_.param(b, s.w) : Tensor{};
  Tensor dW = s.w != ParamSlot::Count ? st_.grad(b, s.w) : Tensor{};
  Tensor dB = s.b != ParamSlot::Count ? st_.grad(b, s.b) : Tensor{};
  auto in = [&](std::size_t k) -> const Tensor& { return t[s.in[k]]; };
  auto out = [&](std::size_t k) -> const Tensor& { return t[s.out[k]]; };
  auto gin = [&](std::size_t k) -> const Tensor& { return g[s.in[k]]; };
  auto gout = [&](std::size_t k) -> const Tensor& { return g[s.out[k]]; };
  switch (s.op) {
    case OpKind::LayerNorm:
      be_.layernorm_bwd(in(0), W, gout(0), gin(0), dW, dB, s.M, s.K, eps, acc[0]);
      break;
    case OpKind::RmsNorm: be_.rmsnorm_bwd(in(0), W, gout(0), gin(0), dW, s.M, s.K, eps, acc[0]); break;
    case OpKind::Linear:
      be_.linear_bwd(in(0), W, gout(0), &gin(0), dW, dB ? &dB : nullptr, s.M, s.K, s.N, acc[0]);
      break;
    case OpKind::Rope:
      be_.rope_bwd(gout(0), gin(0), a, static_cast<float>(cfg_.rope_theta), acc[0]);
      break;
    case OpKind::AttnSoftmax: be_.attn_softmax_bwd(in(0), out(0), gout(0), gin(0), a); break;
    case OpKind::DropoutMask: break;
    case OpKind::AttnDropout: be_.dropout_bwd(gout(0), in(1), gin(0), p, s.M, acc[0]); break;
    case OpKind::AttnPV: be_.attn_pv_bwd(in(0), in(1), gout(0), gin(0), gin(1), a, acc[0]); break;
    case OpKind::FlashAttn:
      be_.flash_bwd(in(0), out(0), out(1), gout(0), gin(0), a, key(b, kSiteAttentionProbs), p);
      break;
    case OpKind::Residual:
      be_.residual_bwd(gout(0), s.in.size() > 2 ? &in(2) : nullptr, gin(0), gin(1), p, s.M,
                       acc[0], acc[1]);
      break;
    case OpKind::Gelu: be_.gelu_bwd(in(0), gout(0), gin(0), s.M, acc[0]); break;
    case OpKind::SwiGlu: be_.swiglu_bwd(in(0), gout(0), gin(0), s.M, s.K, acc[0]); break;
  }
}

}  // namespace remat
