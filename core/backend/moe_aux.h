// The load-balancing loss of a mixture of experts (model/moe_config.h aux_loss_coef; Switch
// Transformer's, as Hugging Face's Mixtral, Qwen-MoE and gpt-oss compute it): over the tokens of
// every MoE layer of a micro-batch together (T = layers · tokens rows),
//   loss = coef · E · sum_e (C_e / T) · (S_e / T),
// C_e the top-k choices of expert e (before any capacity drops them), S_e the sum of expert e's
// softmax probability over the rows. The choice gets no gradient: d loss / d p_row(e) =
// coef · E · C_e / T², the same for every row of every layer, which each layer's MoeRoute
// backward takes through its softmax. One buffer per micro-batch holds it all (fp32), shared by
// the CPU loops and the CUDA kernels (host-and-device functions).
#pragma once
#include <stdint.h>

#include "core/util/bf16.h"  // REMAT_HD

namespace remat {

struct MoeAuxLayout {
  int layers = 0, experts = 0;
  // Layer l's statistics: [C_e for every e, then S_e for every e].
  REMAT_HD int64_t stats(int l) const { return static_cast<int64_t>(l) * 2 * experts; }
  REMAT_HD int64_t grad() const { return stats(layers); }          // [E]: d loss / d p(e), times the gradient's scale
  REMAT_HD int64_t loss() const { return grad() + experts; }       // [1]
  REMAT_HD int64_t size() const { return loss() + 1; }
};

// The loss and its gradient from every layer's statistics, summed layer by layer in order in
// double; g[e] scaled by grad_scale (a replica's share of the summed gradient).
REMAT_HD void moe_aux_loss_of(const MoeAuxLayout& L, const float* stats, int64_t tokens, double coef,
                              double grad_scale, float* g, float* loss) {
  const int E = L.experts;
  const double T = static_cast<double>(tokens) * L.layers, k = T > 0.0 ? coef * E / (T * T) : 0.0;
  double total = 0.0;
  for (int e = 0; e < E; ++e) {
    double C = 0.0, S = 0.0;
    for (int l = 0; l < L.layers; ++l) {
      C += stats[L.stats(l) + e];
      S += stats[L.stats(l) + E + e];
    }
    total += C * S;
    g[e] = static_cast<float>(k * C * grad_scale);
  }
  *loss = static_cast<float>(k * total);
}

}  // namespace remat
