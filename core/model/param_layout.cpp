#include "core/model/param_layout.h"
#include <algorithm>

namespace remat {

namespace {

// Calls f(our row, Hugging Face's row) for the first row of every d-row head of a grouped q|k|v.
template <class F>
void each_qkv_head(const ParamSpec& p, F f) {
  const auto& g = p.hf_qkv;
  const std::int64_t q = g.groups * g.rep * g.d, kv = g.groups * g.d, per = (g.rep + 2) * g.d;
  for (std::int64_t grp = 0; grp < g.groups; ++grp) {
    for (std::int64_t r = 0; r < g.rep; ++r) f((grp * g.rep + r) * g.d, grp * per + r * g.d);
    f(q + grp * g.d, grp * per + g.rep * g.d);
    f(q + kv + grp * g.d, grp * per + (g.rep + 1) * g.d);
  }
}

}  // namespace

void qkv_rows_to_hf(const ParamSpec& p, const float* ours, float* hf) {
  const std::int64_t n = p.hf_qkv.d * p.cols;
  each_qkv_head(p, [&](std::int64_t o, std::int64_t h) { std::copy(ours + o * p.cols, ours + o * p.cols + n, hf + h * p.cols); });
}

void qkv_rows_from_hf(const ParamSpec& p, const float* hf, float* ours) {
  const std::int64_t n = p.hf_qkv.d * p.cols;
  each_qkv_head(p, [&](std::int64_t o, std::int64_t h) { std::copy(hf + h * p.cols, hf + h * p.cols + n, ours + o * p.cols); });
}

namespace {

// Calls f(our index, Hugging Face's index) for every value of a stacked parameter.
template <class F>
void each_stacked(const ParamSpec& p, F f) {
  const std::int64_t E = p.hf_stack.experts, n = p.rows / E, half = n / 2;
  for (std::int64_t e = 0; e < E; ++e)
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int64_t hr = !p.hf_stack.interleaved ? r : r < half ? 2 * r : 2 * (r - half) + 1;
      for (std::int64_t c = 0; c < p.cols; ++c) f((e * n + r) * p.cols + c, (e * p.cols + c) * n + hr);
    }
}

}  // namespace

std::vector<std::int64_t> stacked_hf_shape(const ParamSpec& p) {
  const std::int64_t E = p.hf_stack.experts, n = p.rows / E;
  return p.cols == 1 ? std::vector<std::int64_t>{E, n} : std::vector<std::int64_t>{E, p.cols, n};
}

void stacked_to_hf(const ParamSpec& p, const float* ours, float* hf) {
  each_stacked(p, [&](std::int64_t o, std::int64_t h) { hf[h] = ours[o]; });
}

void stacked_from_hf(const ParamSpec& p, const float* hf, float* ours) {
  each_stacked(p, [&](std::int64_t o, std::int64_t h) { ours[o] = hf[h]; });
}

std::int64_t ParamLayout::add(ParamSpec p) {
  p.offset = total_;
  total_ += p.numel();
  params_.push_back(std::move(p));
  return params_.back().offset;
}

namespace {

ParamSpec vec(const std::string& name, const std::string& hf, std::int64_t n) {
  ParamSpec p;
  p.name = name;
  p.hf_name = hf;
  p.rows = n;
  p.cols = 1;
  return p;
}

ParamSpec mat(const std::string& name, const std::string& hf, std::int64_t rows, std::int64_t cols,
              bool transposed = false) {
  ParamSpec p;
  p.name = name;
  p.hf_name = hf;
  p.rows = rows;
  p.cols = cols;
  p.decay = true;
  p.hf_transposed = transposed;
  return p;
}

// A fused tensor stored by Hugging Face as separate parts (each with the suffix).
ParamSpec fused(ParamSpec p, const std::vector<std::pair<std::string, std::int64_t>>& parts,
                const std::string& suffix) {
  p.hf_parts.clear();
  for (const auto& [n, rows] : parts) p.hf_parts.emplace_back(n + suffix, rows);
  p.hf_name = p.hf_parts.front().first;
  return p;
}

// A mixture-of-experts MLP's parameters: the router [experts, h], every expert's gate|up stacked
// by expert [experts · up, h] and its down projection [experts · h, f], each expert's part a
// Hugging Face tensor of its own (Mixtral: block_sparse_moe.gate, experts.e.w1 (gate), w3 (up),
// w2 (down); the others: mlp.gate, mlp.experts.e.gate_proj, up_proj, down_proj).
template <class Add>
void moe_params(const ModelConfig& m, int b, const std::string& hf, const std::string& p, Add&& block_param) {
  const MoeConfig& e = m.moe;
  const std::int64_t h = m.hidden, f = e.ffn, up = m.gated_mlp() ? 2 * f : f;
  const bool mixtral = m.family == Family::Mixtral, oss = m.family == Family::GptOss, llama4 = m.family == Family::Llama4;
  const std::string ml = hf + (mixtral ? "block_sparse_moe." : llama4 ? "feed_forward." : "mlp.");
  const std::string router = ml + (oss || llama4 ? "router." : "gate.");
  block_param(b, mat(p + "mlp.router.w", router + "weight", e.experts, h));
  if (e.router_bias) block_param(b, vec(p + "mlp.router.b", router + "bias", e.experts));
  // DeepSeek-V3's e_score_correction_bias (zero to start, no gradient reaches it).
  if (e.score_bias) block_param(b, vec(p + "mlp.router.bias", router + "e_score_correction_bias", e.experts));
  if (oss || llama4) {  // every expert's projections stacked in one tensor each, stored [in, out]; gpt-oss's gate|up
                        // interleaved, Llama 4's in halves
    auto stack = [&](ParamSpec s, bool interleaved) {
      s.hf_stack = {e.experts, interleaved && m.gated_mlp()};
      return s;
    };
    block_param(b, stack(mat(p + "mlp.experts.fc.w", ml + "experts.gate_up_proj", e.experts * up, h), oss));
    block_param(b, stack(mat(p + "mlp.experts.fc2.w", ml + "experts.down_proj", e.experts * h, f), false));
    if (e.expert_bias) {
      block_param(b, stack(vec(p + "mlp.experts.fc.b", ml + "experts.gate_up_proj_bias", e.experts * up), oss));
      block_param(b, stack(vec(p + "mlp.experts.fc2.b", ml + "experts.down_proj_bias", e.experts * h), false));
    }
  } else {  // each expert's projections as tensors of their own
    std::vector<std::pair<std::string, std::int64_t>> gu, down;
    for (int x = 0; x < e.experts; ++x) {
      const std::string ex = ml + "experts." + std::to_string(x) + ".";
      if (m.gated_mlp()) {
        gu.emplace_back(ex + (mixtral ? "w1" : "gate_proj"), f);
        gu.emplace_back(ex + (mixtral ? "w3" : "up_proj"), f);
      } else {
        gu.emplace_back(ex + (mixtral ? "w1" : "up_proj"), f);
      }
      down.emplace_back(ex + (mixtral ? "w2" : "down_proj"), h);
    }
    block_param(b, fused(mat(p + "mlp.experts.fc.w", "", e.experts * up, h), gu, ".weight"));
    block_param(b, fused(mat(p + "mlp.experts.fc2.w", "", e.experts * h, f), down, ".weight"));
    if (e.expert_bias) {  // per expert a bias of each projection's width, named as its weight's
      block_param(b, fused(vec(p + "mlp.experts.fc.b", "", e.experts * up), gu, ".bias"));
      block_param(b, fused(vec(p + "mlp.experts.fc2.b", "", e.experts * h), down, ".bias"));
    }
  }
  if (e.shared_ffn == 0) return;
  // Shared experts: one MLP of width shared_ffn (Qwen2-MoE: mlp.shared_expert, its gate
  // mlp.shared_expert_gate [1, h]).
  const std::int64_t sf = e.shared_ffn, sup = m.gated_mlp() ? 2 * sf : sf;
  const bool deepseek = m.family == Family::DeepseekV2 || m.family == Family::DeepseekV3;
  const std::string sh = ml + (deepseek ? "shared_experts." : "shared_expert.");
  std::vector<std::pair<std::string, std::int64_t>> sgu;
  if (m.gated_mlp()) sgu = {{sh + "gate_proj", sf}, {sh + "up_proj", sf}};
  else sgu = {{sh + "up_proj", sf}};
  block_param(b, fused(mat(p + "mlp.shared.fc.w", "", sup, h), sgu, ".weight"));
  block_param(b, mat(p + "mlp.shared.fc2.w", sh + "down_proj.weight", h, sf));
  if (e.shared_gate) block_param(b, mat(p + "mlp.shared_gate.w", ml + "shared_expert_gate.weight", 1, h));
}

// Multi-head latent attention's parameters (mla_config.h; DeepSeek's self_attn names): the q
// projections (q_a, its norm, q_b; or one q), the keys' and values' down projection split by rows
// into the latent's (kv_a) and the rotated key part's (k_rope) as one Hugging Face tensor, the
// latent's norm and the up projection kv_b. The output projection is the caller's.
template <class Add, class Norm>
void mla_params(const ModelConfig& m, int b, const std::string& at, const std::string& p, Add&& block_param,
                Norm&& norm_vec) {
  const MlaConfig& a = m.mla;
  const std::int64_t h = m.hidden, H = m.heads;
  if (a.q_rank > 0) {
    block_param(b, mat(p + "attn.q_a.w", at + "q_a_proj.weight", a.q_rank, h));
    block_param(b, norm_vec(p + "attn.q_a_norm.w", at + "q_a_layernorm.weight", a.q_rank));
    block_param(b, mat(p + "attn.q_b.w", at + "q_b_proj.weight", H * a.qk_dim(), a.q_rank));
  } else {
    block_param(b, mat(p + "attn.q.w", at + "q_proj.weight", H * a.qk_dim(), h));
  }
  ParamSpec kva = mat(p + "attn.kv_a.w", at + "kv_a_proj_with_mqa.weight", a.kv_rank, h);
  kva.hf_rows = a.kv_rank + a.rope_dim;
  block_param(b, kva);
  block_param(b, mat(p + "attn.k_rope.w", "", a.rope_dim, h));
  block_param(b, norm_vec(p + "attn.kv_a_norm.w", at + "kv_a_layernorm.weight", a.kv_rank));
  block_param(b, mat(p + "attn.kv_b.w", at + "kv_b_proj.weight", H * (a.nope_dim + a.v_dim), a.kv_rank));
}

}  // namespace

ParamLayout::ParamLayout(const ModelConfig& m, LayoutParts parts) : parts_(parts) {
  const std::int64_t h = m.hidden, f = m.ffn, V = m.vocab, q = m.q_width(), kv = m.kv_width();
  const std::int64_t up = m.gated_mlp() ? 2 * f : f;
  const bool gpt2 = m.family == Family::Gpt2, phi3 = m.family == Family::Phi3, neox = m.family == Family::GptNeox,
             falcon = m.family == Family::Falcon;
  const bool ln = m.norm == NormKind::LayerNorm;
  blocks_.assign(static_cast<std::size_t>(m.layers), {});
  // A parameter of block b, named "h.b." and its name in the block.
  auto block_param = [&](int b, ParamSpec p) {
    p.block = b;
    p.local = p.name.substr(p.name.find('.', 2) + 1);
    blocks_[static_cast<std::size_t>(b)].push_back(params_.size());
    add(std::move(p));
  };
  // A norm's weight (and LayerNorm's bias) under its Hugging Face module name.
  // A norm's weight starts at its identity: 1, or 0 under Gemma's 1 + w.
  const float norm_one = m.norm_unit_offset ? 0.0f : 1.0f;
  auto norm_w = [&](const std::string& ours, const std::string& hf) {
    ParamSpec p = vec(ours, hf, h);
    p.fill = norm_one;
    return p;
  };
  auto norm = [&](int b, const std::string& ours, const std::string& hf) {
    block_param(b, norm_w(ours + ".w", hf + ".weight"));
    if (ln) block_param(b, vec(ours + ".b", hf + ".bias", h));
  };
  const std::string root = gpt2 || falcon ? "transformer." : neox ? "gpt_neox." : "model.";
  if (parts.embedding || (parts.head && m.tied_embeddings))
    wte = add(mat("wte", root + (gpt2 ? "wte.weight" : neox ? "embed_in.weight" : falcon ? "word_embeddings.weight"
                                                                                   : "embed_tokens.weight"),
                  V, h));
  if (parts.embedding && m.position == PositionKind::Learned)
    wpe = add(mat("wpe", root + (gpt2 ? "wpe.weight" : "embed_positions.weight"), m.positions, h));
  for (int b = 0; b < m.layers; ++b) {
    const std::string p = "h." + std::to_string(b) + ".";
    const std::string hf = root + (gpt2 || falcon ? "h." : "layers.") + std::to_string(b) + ".";
    const bool pre = m.placement != NormPlacement::Post, post = m.placement != NormPlacement::Pre;
    if (gpt2) {
      if (pre) norm(b, p + "ln1", hf + "ln_1");
      block_param(b, mat(p + "attn.qkv.w", hf + "attn.c_attn.weight", q + 2 * kv, h, true));
      if (m.qkv_bias) block_param(b, vec(p + "attn.qkv.b", hf + "attn.c_attn.bias", q + 2 * kv));
      block_param(b, mat(p + "attn.proj.w", hf + "attn.c_proj.weight", h, q, true));
      if (m.out_bias) block_param(b, vec(p + "attn.proj.b", hf + "attn.c_proj.bias", h));
      if (pre) norm(b, p + "ln2", hf + "ln_2");
      block_param(b, mat(p + "mlp.fc.w", hf + "mlp.c_fc.weight", up, h, true));
      if (m.mlp_bias) block_param(b, vec(p + "mlp.fc.b", hf + "mlp.c_fc.bias", up));
      block_param(b, mat(p + "mlp.fc2.w", hf + "mlp.c_proj.weight", h, f, true));
      if (m.mlp_bias) block_param(b, vec(p + "mlp.fc2.b", hf + "mlp.c_proj.bias", h));
      continue;
    }
    if (neox || falcon) {
      // query_key_value stored by kv group: per head [q, k, v] (GPT-NeoX), a group's q heads then
      // its k and v (Falcon; multi-query: all q heads, then k, then v). Falcon's parallel block
      // names its two norms ln_attn and ln_mlp; a shared norm has no ln2.
      const ParamSpec::QkvGroups groups{m.kv_heads, m.heads / m.kv_heads, m.head_dim()};
      const std::string at = hf + (neox ? "attention." : "self_attention.");
      const bool two = m.block_layout == BlockLayout::Parallel && falcon;
      norm(b, p + "ln1", hf + (two ? "ln_attn" : "input_layernorm"));
      ParamSpec qkv = mat(p + "attn.qkv.w", at + "query_key_value.weight", q + 2 * kv, h);
      qkv.hf_qkv = groups;
      block_param(b, qkv);
      if (m.qkv_bias) {
        ParamSpec qb = vec(p + "attn.qkv.b", at + "query_key_value.bias", q + 2 * kv);
        qb.hf_qkv = groups;
        block_param(b, qb);
      }
      block_param(b, mat(p + "attn.proj.w", at + "dense.weight", h, q));
      if (m.out_bias) block_param(b, vec(p + "attn.proj.b", at + "dense.bias", h));
      if (m.block_layout != BlockLayout::ParallelSharedNorm)
        norm(b, p + "ln2", hf + (two ? "ln_mlp" : "post_attention_layernorm"));
      block_param(b, mat(p + "mlp.fc.w", hf + "mlp.dense_h_to_4h.weight", up, h));
      if (m.mlp_bias) block_param(b, vec(p + "mlp.fc.b", hf + "mlp.dense_h_to_4h.bias", up));
      block_param(b, mat(p + "mlp.fc2.w", hf + "mlp.dense_4h_to_h.weight", h, f));
      if (m.mlp_bias) block_param(b, vec(p + "mlp.fc2.b", hf + "mlp.dense_4h_to_h.bias", h));
      continue;
    }
    const std::string at = hf + "self_attn.", ml = hf + (m.family == Family::Llama4 ? "feed_forward." : "mlp.");
    if (pre) norm(b, p + "ln1", hf + "input_layernorm");
    const std::vector<std::pair<std::string, std::int64_t>> qkv_parts = {
        {at + "q_proj", q}, {at + "k_proj", kv}, {at + "v_proj", kv}};
    if (m.mla.on()) {
      mla_params(m, b, at, p, block_param, [&](const std::string& ours, const std::string& hfn, std::int64_t n) {
        ParamSpec w = vec(ours, hfn, n);
        w.fill = norm_one;
        return w;
      });
    } else {
      ParamSpec qkv = mat(p + "attn.qkv.w", at + "qkv_proj.weight", q + 2 * kv, h);
      block_param(b, phi3 ? qkv : fused(qkv, qkv_parts, ".weight"));
    }
    if (m.qkv_bias) {
      ParamSpec qb = vec(p + "attn.qkv.b", at + "qkv_proj.bias", q + 2 * kv);
      block_param(b, phi3 ? qb : fused(qb, qkv_parts, ".bias"));
    }
    if (m.qk_norm == QkNormKind::Projection || m.qk_norm == QkNormKind::Head) {
      // QK-norm scales by its weight (no offset; per head, (1 + w) under a unit offset, as
      // Gemma 3's): it starts at its identity. Per head: one d-wide weight for the q heads, one
      // for the k heads.
      const bool heads = m.qk_norm == QkNormKind::Head;
      ParamSpec qn = vec(p + "attn.q_norm.w", at + "q_norm.weight", heads ? m.head_dim() : q),
                kn = vec(p + "attn.k_norm.w", at + "k_norm.weight", heads ? m.head_dim() : kv);
      qn.fill = kn.fill = heads ? norm_one : 1.0f;
      block_param(b, qn);
      block_param(b, kn);
    }
    if (m.attn_sinks) block_param(b, vec(p + "attn.sinks", at + "sinks", m.heads));
    block_param(b, mat(p + "attn.proj.w", at + "o_proj.weight", h, m.ctx_width()));
    if (m.out_bias) block_param(b, vec(p + "attn.proj.b", at + "o_proj.bias", h));
    if (post) norm(b, p + "attn.post_norm", hf + "post_attention_layernorm");
    if (pre)
      norm(b, p + "ln2",
           hf + (m.placement == NormPlacement::Sandwich ? "pre_feedforward_layernorm" : "post_attention_layernorm"));
    if (m.moe_in(parts.first_block + b)) {
      moe_params(m, b, hf, p, block_param);
      if (post) norm(b, p + "mlp.post_norm", hf + "post_feedforward_layernorm");
      continue;
    }
    const std::vector<std::pair<std::string, std::int64_t>> gu_parts = {{ml + "gate_proj", f}, {ml + "up_proj", f}};
    ParamSpec fc = mat(p + "mlp.fc.w", m.gated_mlp() ? ml + "gate_up_proj.weight" : ml + "up_proj.weight", up, h);
    if (m.gated_mlp() && !phi3) fc = fused(fc, gu_parts, ".weight");
    block_param(b, fc);
    if (m.mlp_bias) {
      ParamSpec fb = vec(p + "mlp.fc.b", m.gated_mlp() ? ml + "gate_up_proj.bias" : ml + "up_proj.bias", up);
      if (m.gated_mlp() && !phi3) fb = fused(fb, gu_parts, ".bias");
      block_param(b, fb);
    }
    block_param(b, mat(p + "mlp.fc2.w", ml + "down_proj.weight", h, f));
    if (m.mlp_bias) block_param(b, vec(p + "mlp.fc2.b", ml + "down_proj.bias", h));
    if (post) norm(b, p + "mlp.post_norm", hf + "post_feedforward_layernorm");
  }
  if (!parts.head) return;
  const std::string lnf = gpt2 || falcon ? "ln_f" : neox ? "final_layer_norm" : "norm";
  lnf_w = add(norm_w("lnf.w", root + lnf + ".weight"));
  if (ln) lnf_b = add(vec("lnf.b", root + lnf + ".bias", h));
  if (!m.tied_embeddings) lm_head = add(mat("lm_head", neox ? "embed_out.weight" : "lm_head.weight", V, h));
}

const ParamSpec* ParamLayout::in_block(int block, const std::string& local) const {
  for (std::size_t i : blocks_[static_cast<std::size_t>(block)])
    if (params_[i].local == local) return &params_[i];
  return nullptr;
}

std::int64_t ParamLayout::offset(int block, const std::string& local) const {
  const ParamSpec* p = in_block(block, local);
  return p ? p->offset : -1;
}

std::int64_t ParamLayout::numel(int block, const std::string& local) const {
  const ParamSpec* p = in_block(block, local);
  return p ? p->numel() : 0;
}

const ParamSpec* ParamLayout::find(const std::string& name) const {
  if (name.empty()) return nullptr;  // (a parameter inside another's Hugging Face tensor has no hf_name)
  for (const auto& p : params_)
    if (p.name == name || p.hf_name == name) return &p;
  return nullptr;
}

}  // namespace remat
