// The router's arithmetic for one token, shared by the CPU loops and the CUDA kernels so that
// both backends route alike (host-and-device inline functions, fp32, no arrays the size of the
// experts: a CUDA thread computes a token's scores on the fly). Scores: softmax of the logits
// (Mixtral, Qwen) or their sigmoid (DeepSeek-V3). The choice ranks each expert by its score plus
// a selection bias (DeepSeek-V3's e_score_correction_bias; it changes the choice, not the
// weights, and gets no gradient); with groups, only the topk_groups groups of highest group score
// (the sum of a group's two best choice scores, or with group_max its best (DeepSeek-V2); ties to
// the lower group) are eligible, the
// others' choice scores set to 0 as Hugging Face sets them; the top-k by choice score (ties to
// the lower index; NaN last). Weights: the chosen scores, divided by their sum with norm (plus
// 1e-20 for sigmoid scores, as DeepSeek-V3), times `scaling` (routed_scaling_factor).
#pragma once
#include <math.h>
#include <stdint.h>

#include "core/util/bf16.h"  // REMAT_HD

namespace remat {

struct MoeRouter {
  int experts = 0, top_k = 0;
  bool sigmoid = false, norm = false;
  int groups = 0, topk_groups = 0;  // groups <= 1: no group limit (at most 64 groups)
  bool group_max = false;           // a group's score: its best choice score, not its two best summed
  float scaling = 1.0f;
};

REMAT_HD float moe_rank_key(float v) { return isnan(v) ? -INFINITY : v; }

// A token's scores from its logits: logit(e) gives logit e. Softmax needs the row's maximum and
// sum, taken once.
template <class Logit>
struct MoeScores {
  Logit logit;
  bool sigmoid = false;
  float mx = 0.0f, sum = 1.0f;
  REMAT_HD MoeScores(Logit l, const MoeRouter& r) : logit(l), sigmoid(r.sigmoid) {
    if (sigmoid) return;
    mx = -INFINITY;
    for (int e = 0; e < r.experts; ++e) mx = fmaxf(mx, logit(e));
    sum = 0.0f;
    for (int e = 0; e < r.experts; ++e) sum += expf(logit(e) - mx);
  }
  REMAT_HD float operator()(int e) const {
    return sigmoid ? 1.0f / (1.0f + expf(-logit(e))) : expf(logit(e) - mx) / sum;
  }
};

// The next of values v(i), i < n, in descending order (ties to the lower index, NaN last) after
// (last value, last index); the first with last index -1.
template <class V>
REMAT_HD int moe_next(V v, int n, float last_v, int last_i) {
  int best = -1;
  float bv = -INFINITY;
  for (int i = 0; i < n; ++i) {
    const float x = moe_rank_key(v(i));
    const bool after = last_i < 0 || x < last_v || (x == last_v && i > last_i);
    if (after && (best < 0 || x > bv)) best = i, bv = x;
  }
  return best;
}

// The chosen experts and their weights, from the scores and the selection bias (bias(e): 0 when
// the router has none).
template <class Score, class Bias>
REMAT_HD void moe_choose(const MoeRouter& r, const Score& score, const Bias& bias, int* chosen, float* w) {
  const int E = r.experts;
  const bool grouped = r.groups > 1;
  const int per = grouped ? E / r.groups : E;
  auto choice = [&](int e) { return score(e) + bias(e); };
  uint64_t eligible = ~uint64_t{0};
  if (grouped) {
    auto group_score = [&](int g) {  // a group's two best choice scores (or its best)
      float a = -INFINITY, b = -INFINITY;
      for (int e = g * per; e < (g + 1) * per; ++e) {
        const float x = moe_rank_key(choice(e));
        if (x > a) b = a, a = x;
        else if (x > b) b = x;
      }
      return per > 1 && !r.group_max ? a + b : a;
    };
    eligible = 0;
    int g = -1;
    float gv = 0.0f;
    for (int i = 0; i < r.topk_groups; ++i) {
      g = moe_next(group_score, r.groups, gv, g);
      gv = moe_rank_key(group_score(g));
      eligible |= uint64_t{1} << g;
    }
  }
  auto masked = [&](int e) { return (eligible >> (e / per)) & 1u ? choice(e) : 0.0f; };
  float sum = 0.0f, last_v = 0.0f;
  int last = -1;
  for (int j = 0; j < r.top_k; ++j) {
    last = moe_next(masked, E, last_v, last);
    last_v = moe_rank_key(masked(last));
    chosen[j] = last;
    w[j] = score(last);
    sum += w[j];
  }
  if (r.norm) {
    const float denom = r.sigmoid ? sum + 1e-20f : sum;
    for (int j = 0; j < r.top_k; ++j) w[j] /= denom;
  }
  for (int j = 0; j < r.top_k; ++j) w[j] *= r.scaling;
}

// The logits' gradient: out(e, d logit e) for every expert, from the weights' gradient dw[top_k]
// and the chosen experts. Scratch: ds[top_k]. aux (softmax routers; null: none): a gradient of
// every expert's score besides the weights' (the load-balancing loss's, backend/moe_aux.h).
template <class Score, class Out>
REMAT_HD void moe_score_grad(const MoeRouter& r, const Score& score, const int* chosen, const float* dw, float* ds,
                             Out out, const float* aux = nullptr) {
  const int E = r.experts, k = r.top_k;
  if (r.norm) {  // w_j = scaling · s_j / S
    float S = 0.0f, gu = 0.0f;
    for (int j = 0; j < k; ++j) S += score(chosen[j]);
    if (r.sigmoid) S += 1e-20f;
    for (int j = 0; j < k; ++j) gu += r.scaling * dw[j] * (score(chosen[j]) / S);
    for (int j = 0; j < k; ++j) ds[j] = (r.scaling * dw[j] - gu) / S;
  } else {
    for (int j = 0; j < k; ++j) ds[j] = r.scaling * dw[j];
  }
  float dot = 0.0f;  // softmax: sum over the chosen of s · ds (the others' ds are 0)
  if (!r.sigmoid)
    for (int j = 0; j < k; ++j) dot += score(chosen[j]) * ds[j];
  if (aux)
    for (int e = 0; e < E; ++e) dot += score(e) * aux[e];
  for (int e = 0; e < E; ++e) {
    float d = 0.0f;
    for (int j = 0; j < k; ++j)
      if (chosen[j] == e) d = ds[j];
    if (aux) d += aux[e];
    const float s = score(e);
    out(e, r.sigmoid ? d * s * (1.0f - s) : s * (d - dot));
  }
}

}  // namespace remat
