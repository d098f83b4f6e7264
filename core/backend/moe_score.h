// The router's arithmetic for one token, shared by the CPU loops and the CUDA kernels so that
// both backends route alike (host-and-device inline functions, fp32). Scores: softmax of the
// logits (Mixtral, Qwen) or their sigmoid (DeepSeek-V3). The choice ranks each expert by its
// score plus a selection bias (DeepSeek-V3's e_score_correction_bias; it changes the choice, not
// the weights, and gets no gradient); with groups, only the topk_groups groups of highest group
// score (the sum of a group's two best) are eligible, the others' choice scores set to 0 as
// Hugging Face sets them; the top-k by choice score (ties to the lower index; NaN last). Weights:
// the chosen scores, divided by their sum with norm (plus 1e-20 for sigmoid scores, as
// DeepSeek-V3), times `scaling` (routed_scaling_factor).
#pragma once
#include <math.h>

#include "core/util/bf16.h"  // REMAT_HD

namespace remat {

struct MoeRouter {
  int experts = 0, top_k = 0;
  bool sigmoid = false, norm = false;
  int groups = 0, topk_groups = 0;  // groups <= 1: no group limit
  float scaling = 1.0f;
};

// s[e] <- the score of logit s[e], in place.
REMAT_HD void moe_scores(const MoeRouter& r, float* s) {
  const int E = r.experts;
  if (r.sigmoid) {
    for (int e = 0; e < E; ++e) s[e] = 1.0f / (1.0f + expf(-s[e]));
    return;
  }
  float mx = -INFINITY;
  for (int e = 0; e < E; ++e) mx = fmaxf(mx, s[e]);
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) sum += (s[e] = expf(s[e] - mx));
  for (int e = 0; e < E; ++e) s[e] /= sum;
}

REMAT_HD float moe_rank_key(float v) { return isnan(v) ? -INFINITY : v; }

// The index of the largest of v[0..n) not yet taken (ties to the lower index; NaN as -inf), or
// the lowest untaken one when all are -inf.
REMAT_HD int moe_argmax(const float* v, int n, const bool* taken) {
  int best = -1;
  float bv = -INFINITY;
  for (int i = 0; i < n; ++i) {
    if (taken[i]) continue;
    const float x = moe_rank_key(v[i]);
    if (best < 0 || x > bv) best = i, bv = x;
  }
  return best;
}

// From scores s (and the selection bias, may be null): the chosen experts and their weights.
// Scratch: c[experts], taken[experts], gscore[groups], gtaken[groups].
REMAT_HD void moe_choose(const MoeRouter& r, const float* s, const float* bias, float* c, bool* taken, float* gscore,
                         bool* gtaken, int* chosen, float* w) {
  const int E = r.experts;
  for (int e = 0; e < E; ++e) {
    c[e] = bias ? s[e] + bias[e] : s[e];
    taken[e] = false;
  }
  if (r.groups > 1) {
    const int per = E / r.groups;
    for (int g = 0; g < r.groups; ++g) {  // a group's score: its two best choice scores
      float a = -INFINITY, b = -INFINITY;
      for (int e = g * per; e < (g + 1) * per; ++e) {
        const float x = moe_rank_key(c[e]);
        if (x > a) b = a, a = x;
        else if (x > b) b = x;
      }
      gscore[g] = per > 1 ? a + b : a;
      gtaken[g] = false;
    }
    for (int i = 0; i < r.topk_groups; ++i) gtaken[moe_argmax(gscore, r.groups, gtaken)] = true;
    for (int e = 0; e < E; ++e)
      if (!gtaken[e / per]) c[e] = 0.0f;
  }
  float sum = 0.0f;
  for (int j = 0; j < r.top_k; ++j) {
    const int e = moe_argmax(c, E, taken);
    taken[e] = true;
    chosen[j] = e;
    w[j] = s[e];
    sum += s[e];
  }
  if (r.norm) {
    const float denom = r.sigmoid ? sum + 1e-20f : sum;
    for (int j = 0; j < r.top_k; ++j) w[j] /= denom;
  }
  for (int j = 0; j < r.top_k; ++j) w[j] *= r.scaling;
}

// The logits' gradient dl[experts] from the weights' dw[top_k], the scores s and the chosen experts.
REMAT_HD void moe_score_grad(const MoeRouter& r, const float* s, const int* chosen, const float* dw, float* dl) {
  const int E = r.experts, k = r.top_k;
  for (int e = 0; e < E; ++e) dl[e] = 0.0f;  // ds first
  if (r.norm) {  // w_j = scaling · s_j / S
    float S = 0.0f, gu = 0.0f;
    for (int j = 0; j < k; ++j) S += s[chosen[j]];
    if (r.sigmoid) S += 1e-20f;
    for (int j = 0; j < k; ++j) gu += r.scaling * dw[j] * (s[chosen[j]] / S);
    for (int j = 0; j < k; ++j) dl[chosen[j]] = (r.scaling * dw[j] - gu) / S;
  } else {
    for (int j = 0; j < k; ++j) dl[chosen[j]] = r.scaling * dw[j];
  }
  if (r.sigmoid) {
    for (int e = 0; e < E; ++e) dl[e] *= s[e] * (1.0f - s[e]);
    return;
  }
  float dot = 0.0f;
  for (int e = 0; e < E; ++e) dot += s[e] * dl[e];
  for (int e = 0; e < E; ++e) dl[e] = s[e] * (dl[e] - dot);
}

}  // namespace remat
