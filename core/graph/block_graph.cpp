#include "core/graph/block_graph.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "core/util/error.h"

namespace remat {

namespace {

std::string formula(std::uint64_t bytes_per_elem, std::int64_t mult, const std::string& base) {
  std::int64_t c = static_cast<std::int64_t>(bytes_per_elem) * mult;
  return c == 1 ? base : std::to_string(c) + "·" + base;
}

}  // namespace

OuterSizes::OuterSizes(const ModelConfig& m) {
  std::int64_t bs = m.tokens(), bsh = bs * m.hidden;
  tokens = bs;
  embed_out = bsh;
  embed_mask = m.drops(kDropEmbedding) ? bsh : 0;
  final_in = bsh;
  lnf_out = bsh;
  losses = bs;
}

namespace {

// The structures (RoPE, MoE) of the layer kinds a model's pattern uses, the first the primary
// table's: RoPE as the model's feature, the MLP of the pattern's first kind.
std::vector<std::pair<bool, bool>> structures(const ModelConfig& m) {
  const bool rope = m.position == PositionKind::Rope;
  std::vector<std::pair<bool, bool>> out{{rope, m.moe_in(0)}};
  if (m.layer_kinds.empty()) return out;
  for (int k : m.layer_pattern) {
    if (k < 0 || k >= static_cast<int>(m.layer_kinds.size())) continue;
    const LayerKind& kind = m.layer_kinds[static_cast<std::size_t>(k)];
    const std::pair<bool, bool> key{rope && kind.rope, m.moe.on() && kind.mlp == LayerMlp::Moe};
    if (std::find(out.begin(), out.end(), key) == out.end()) out.push_back(key);
  }
  return out;
}

}  // namespace

MoeDims moe_dims(const ModelConfig& m) {
  MoeDims d;
  if (!m.moe.on()) return d;
  d.experts = m.moe.experts;
  d.top_k = m.moe.top_k;
  d.tokens = m.tokens();
  d.capacity = m.moe.capacity(m.tokens());
  d.norm_topk = m.moe.norm_topk;
  d.sigmoid = m.moe.sigmoid;
  d.groups = m.moe.groups;
  d.topk_groups = m.moe.topk_groups;
  d.group_max = m.moe.group_max;
  d.scaling = static_cast<float>(m.moe.scaling);
  d.weight_input = m.moe.weight_input;
  return d;
}

BlockGraph::BlockGraph(const ModelConfig& m) : BlockGraph(m, m.position == PositionKind::Rope, m.moe_in(0)) {
  const auto keys = structures(m);
  for (std::size_t i = 1; i < keys.size(); ++i) variants_.push_back(BlockGraph(m, keys[i].first, keys[i].second));
}

BlockGraph::BlockGraph(const ModelConfig& m, bool rope, bool moe) : cfg_(m), rope_(rope), moe_(moe) {
  build();
  finish();
}

void BlockGraph::set_first_block(int b) {
  first_block_ = b;
  for (BlockGraph& v : variants_) v.first_block_ = b;
}

int BlockGraph::table_index(int block) const {
  if (variants_.empty()) return 0;
  const int b = first_block_ + block;
  const bool rope = cfg_.rope_in(b), moe = cfg_.moe_in(b);
  if (rope == rope_ && moe == moe_) return 0;
  for (std::size_t i = 0; i < variants_.size(); ++i)
    if (variants_[i].rope_ == rope && variants_[i].moe_ == moe) return static_cast<int>(i) + 1;
  throw Error("block graph: block " + std::to_string(b) + " has a structure none of the model's tables has");
}

BlockGraph BlockGraph::with_variants(BlockGraph primary, std::vector<BlockGraph> variants, const BlockGraph& like) {
  if (static_cast<int>(variants.size()) + 1 != like.table_count())
    throw Error("block graph: " + std::to_string(variants.size() + 1) + " tables for a model with " +
                std::to_string(like.table_count()));
  primary.rope_ = like.rope_;
  primary.moe_ = like.moe_;
  for (std::size_t i = 0; i < variants.size(); ++i) {
    variants[i].rope_ = like.variants_[i].rope_;
    variants[i].moe_ = like.variants_[i].moe_;
  }
  primary.variants_ = std::move(variants);
  primary.set_first_block(primary.first_block_);
  return primary;
}

const BlockGraph& BlockGraph::of(int block) const { return table(table_index(block)); }

int BlockGraph::add_tensor(const std::string& name, DType dt, std::int64_t numel,
                           std::string f) {
  TensorDef t;
  t.name = name;
  t.dtype = dt;
  t.numel = numel;
  t.bytes = static_cast<std::uint64_t>(numel) * dtype_size(dt);
  t.formula = std::move(f);
  tensors_.push_back(std::move(t));
  return static_cast<int>(tensors_.size()) - 1;
}

int BlockGraph::add_step(StepDef s) {
  steps_.push_back(std::move(s));
  return static_cast<int>(steps_.size()) - 1;
}

// A dropout mask depends only on its Philox key, so rebuilding it never needs other tensors.
StepDef mask_step(const std::string& name, int mask, DropoutSite site, std::int64_t n) {
  StepDef s{name, OpKind::DropoutMask, StepKind::Dropout, {}, {mask}, {}};
  s.site = site;
  s.M = n;
  return s;
}

namespace {

StepDef step(const std::string& name, OpKind op, std::vector<int> in, std::vector<int> out) {
  StepDef s;
  s.name = name;
  s.op = op;
  s.in = std::move(in);
  s.out = std::move(out);
  return s;
}

// A linear step with the weight `param`.w and, with bias, `param`.b.
StepDef linear(const std::string& name, int in, int out, const std::string& param, bool bias,
               std::int64_t M, int K, int N) {
  StepDef s = step(name, OpKind::Linear, {in}, {out});
  s.w = param + ".w";
  if (bias) s.b = param + ".b";
  s.M = M;
  s.K = K;
  s.N = N;
  return s;
}

// 2·(query-key pairs a causal mask with window W leaves) − S: S² without a window.
std::uint64_t visible_sq(std::int64_t S, int W) {
  if (W <= 0 || W >= S) return static_cast<std::uint64_t>(S) * static_cast<std::uint64_t>(S);
  const std::uint64_t w = static_cast<std::uint64_t>(W), s = static_cast<std::uint64_t>(S);
  const std::uint64_t pairs = w * (w + 1) / 2 + (s - w) * w;
  return 2 * pairs - s;
}

// The same for chunks of C tokens (the last may be shorter), each causal on its own.
std::uint64_t chunked_sq(std::int64_t S, int C) {
  if (C <= 0 || C >= S) return visible_sq(S, 0);
  const std::uint64_t c = static_cast<std::uint64_t>(C), s = static_cast<std::uint64_t>(S);
  const std::uint64_t full = s / c, r = s % c;
  const std::uint64_t pairs = full * (c * (c + 1) / 2) + r * (r + 1) / 2;
  return 2 * pairs - s;
}

// The MLP activation's step name and op.
std::pair<const char*, OpKind> mlp_activation(MlpKind k) {
  switch (k) {
    case MlpKind::GeluTanh: return {"mlp.gelu", OpKind::Gelu};
    case MlpKind::Gelu: return {"mlp.gelu", OpKind::GeluErf};
    case MlpKind::SwiGlu: return {"mlp.swiglu", OpKind::SwiGlu};
    case MlpKind::GeGlu: return {"mlp.geglu", OpKind::GeGlu};
    case MlpKind::SwiGluClamped: return {"mlp.swiglu", OpKind::SwiGluClamped};
  }
  throw Error("block graph: unknown MLP kind " + std::to_string(static_cast<int>(k)));
}

}  // namespace

// Symbolic size of a [s, b, width] activation in bytes per element e.
std::string BlockGraph::width_formula(std::int64_t width) const {
  const std::uint64_t e = dtype_size(cfg_.dtype);
  const std::int64_t h = cfg_.hidden, f = cfg_.ffn, q = cfg_.q_width(), kv = cfg_.kv_width();
  if (width == h) return formula(e, 1, "s·b·h");
  if (width == 3 * h && q == h && kv == h) return formula(e, 3, "s·b·h");
  if (width == f) return cfg_.gated_mlp() || f != 4 * h ? formula(e, 1, "s·b·f") : formula(e, 4, "s·b·h");
  if (width == 2 * f) return formula(e, 2, "s·b·f");
  if (width == q) return formula(e, 1, "s·b·a·d");
  if (width == q + 2 * kv) return q == h ? formula(e, 1, "s·b·(h+2·kv·d)") : formula(e, 1, "s·b·(a+2·kv)·d");
  return formula(e, width, "s·b");
}

int BlockGraph::norm_step(const std::string& name, const std::string& out, int in, const char* module, int width) {
  const ModelConfig& m = cfg_;
  const int w = width > 0 ? width : m.hidden;
  int o = add_tensor(out, m.dtype, m.tokens() * w, width_formula(w));
  const bool ln = m.norm == NormKind::LayerNorm;
  StepDef s = step(name, ln ? OpKind::LayerNorm : OpKind::RmsNorm, {in}, {o});
  s.w = name + ".w";
  if (ln) s.b = name + ".b";
  s.M = m.tokens();
  s.K = w;
  s.w_offset = m.norm_unit_offset ? 1.0f : 0.0f;
  s.module = module;
  add_step(s);
  return o;
}

int BlockGraph::residual_step(const std::string& name, int res, int x, const std::string& out,
                              DropoutSite site) {
  const ModelConfig& m = cfg_;
  const std::int64_t n = m.tokens() * m.hidden;
  int o = add_tensor(out, m.dtype, n, width_formula(m.hidden));
  StepDef s = step(name, OpKind::Residual, {res, x}, {o});
  if (m.drops(kDropResidual)) {
    const std::string mn = site == kSiteAttentionResidual ? "attn.res_mask" : "mlp.res_mask";
    int mask = add_tensor(mn, DType::U8, n, "s·b·h");
    add_step(mask_step(mn, mask, site, n));
    s.in.push_back(mask);
  }
  s.site = site;
  s.M = n;
  add_step(s);
  return o;
}

int BlockGraph::build_attention(int qkv) {
  const ModelConfig& m = cfg_;
  const DType act = m.dtype;
  const std::uint64_t e = dtype_size(act);
  const std::int64_t B = m.batch, S = m.seq, a = m.heads, bs = B * S;
  const std::int64_t probs_n = B * a * S * S;
  // K: the heads' width the op's products run over (q·k: head_dim; P·V: the value heads'; flash:
  // both, their mean).
  auto attn = [&](StepDef s, int K) {
    s.rows = static_cast<std::uint64_t>(B * a);
    s.K = K;
    s.N = static_cast<int>(S);
    s.sq = m.chunked_size() > 0 ? chunked_sq(S, m.chunked_size()) : visible_sq(S, m.windowed_size());
    s.sq_full = visible_sq(S, 0);
    return s;
  };
  int ctx = add_tensor("attn.ctx", act, bs * m.ctx_width(), width_formula(m.ctx_width()));
  const std::size_t first_step = steps_.size();
  if (m.attention == AttentionImpl::Naive) {
    int probs = add_tensor("attn.probs", act, probs_n, formula(e, 1, "a·s²·b"));
    StepDef sm = attn(step("attn.softmax", OpKind::AttnSoftmax, {qkv}, {probs}), m.head_dim());
    if (m.attn_sinks) sm.w = "attn.sinks";
    add_step(sm);
    int p = probs;
    if (m.drops(kDropAttention)) {
      int mask = add_tensor("attn.drop_mask", DType::U8, probs_n, "a·s²·b");
      add_step(mask_step("attn.drop_mask", mask, kSiteAttentionProbs, probs_n));
      int out = add_tensor("attn.drop_out", act, probs_n, formula(e, 1, "a·s²·b"));
      StepDef dr = step("attn.dropout", OpKind::AttnDropout, {probs, mask}, {out});
      dr.site = kSiteAttentionProbs;
      dr.M = probs_n;
      add_step(dr);
      p = out;
    }
    add_step(attn(step("attn.pv", OpKind::AttnPV, {p, qkv}, {ctx}), m.v_head_dim()));
  } else {
    int lse = add_tensor("attn.lse", DType::F32, B * a * S, "4·a·s·b");
    StepDef fa = attn(step("attn.flash", OpKind::FlashAttn, {qkv}, {ctx, lse}), (m.head_dim() + m.v_head_dim()) / 2);
    fa.site = kSiteAttentionProbs;
    if (m.attn_sinks) fa.w = "attn.sinks";
    add_step(fa);
  }
  for (std::size_t s = first_step; s < steps_.size(); ++s) steps_[s].module = "core_attn";
  return ctx;
}

int BlockGraph::build_latent_qkv(int x) {
  const ModelConfig& m = cfg_;
  const MlaConfig& a = m.mla;
  const std::int64_t bs = m.tokens();
  const int H = m.heads, dq = a.qk_dim(), kvw = H * (a.nope_dim + a.v_dim);
  // The latents (kept), then the up projections and the rotation: Megatron-LM's mla_up_proj.
  int q_in = x, q_in_width = m.hidden;
  if (a.q_rank > 0) {
    int qa = add_tensor("attn.q_a_out", m.dtype, bs * a.q_rank, width_formula(a.q_rank));
    add_step(linear("attn.q_a", x, qa, "attn.q_a", false, bs, m.hidden, a.q_rank));
    q_in = norm_step("attn.q_a_norm", "attn.q_latent", qa, "", a.q_rank);
    q_in_width = a.q_rank;
  }
  int kva = add_tensor("attn.kv_a_out", m.dtype, bs * a.kv_rank, width_formula(a.kv_rank));
  add_step(linear("attn.kv_a", x, kva, "attn.kv_a", false, bs, m.hidden, a.kv_rank));
  int pe = add_tensor("attn.k_pe", m.dtype, bs * a.rope_dim, width_formula(a.rope_dim));
  add_step(linear("attn.k_rope", x, pe, "attn.k_rope", false, bs, m.hidden, a.rope_dim));
  int lat = norm_step("attn.kv_a_norm", "attn.kv_latent", kva, "", a.kv_rank);
  const std::size_t up = steps_.size();
  int q = add_tensor("attn.q", m.dtype, bs * H * dq, width_formula(static_cast<std::int64_t>(H) * dq));
  add_step(linear(a.q_rank > 0 ? "attn.q_b" : "attn.q", q_in, q, a.q_rank > 0 ? "attn.q_b" : "attn.q", false, bs,
                  q_in_width, H * dq));
  int kv = add_tensor("attn.kv", m.dtype, bs * kvw, width_formula(kvw));
  add_step(linear("attn.kv_b", lat, kv, "attn.kv_b", false, bs, a.kv_rank, kvw));
  const int w = m.qkv_width();
  int qkv = add_tensor("attn.qkv", m.dtype, bs * w, width_formula(w));
  StepDef s = step("attn.mla_pack", OpKind::MlaPack, {q, kv, pe}, {qkv});
  s.M = bs;
  s.K = (H + 1) * a.rope_dim;
  add_step(s);
  for (std::size_t i = up; i < steps_.size(); ++i) steps_[i].module = "mla_up_proj";
  return qkv;
}

int BlockGraph::build_mlp(int in) {
  const ModelConfig& m = cfg_;
  const std::int64_t bs = m.tokens(), f = m.ffn;
  const bool gated = m.gated_mlp();
  const int up = gated ? 2 * m.ffn : m.ffn;
  const std::size_t first_step = steps_.size();
  int fc = add_tensor(gated ? "mlp.gate_up" : "mlp.gelu_in", m.dtype, bs * up, width_formula(up));
  add_step(linear(gated ? "mlp.gate_up" : "mlp.fc", in, fc, "mlp.fc",
                  m.mlp_bias, bs, m.hidden, up));
  int act = add_tensor(gated ? "mlp.act" : "mlp.gelu_out", m.dtype, bs * f, width_formula(m.ffn));
  const auto [act_name, act_op] = mlp_activation(m.mlp);
  StepDef s = step(act_name, act_op, {fc}, {act});
  s.M = gated ? bs : bs * f;
  s.K = gated ? m.ffn : 1;
  add_step(s);
  int down = add_tensor(gated ? "mlp.down_out" : "mlp.fc2_out", m.dtype, bs * m.hidden,
                        width_formula(m.hidden));
  add_step(linear(gated ? "mlp.down" : "mlp.fc2", act, down, "mlp.fc2",
                  m.mlp_bias, bs, m.ffn, m.hidden));
  for (std::size_t st = first_step; st < steps_.size(); ++st) steps_[st].module = "mlp";
  return down;
}

std::string BlockGraph::moe_formula(std::int64_t width, bool permuted) const {
  const std::uint64_t e = dtype_size(cfg_.dtype);
  const std::string w = width == cfg_.hidden ? "h" : width == cfg_.moe.ffn ? "f_e" : width == 2 * cfg_.moe.ffn ? "2·f_e"
                        : width == cfg_.moe.experts ? "E" : width == cfg_.moe.top_k ? "k" : std::to_string(width);
  if (!permuted) return formula(e, 1, "s·b·" + w);
  return cfg_.moe.capacity_factor > 0.0 ? formula(e, 1, "E·C·" + w) : formula(e, 1, "s·b·k·" + w);
}

// The mixture of experts (moe_config.h): the router's logits, the top-k routing, the tokens
// permuted into each expert's rows, the experts' projections and activation on those rows, and
// the weighted sum back in token order.
int BlockGraph::build_moe(int in) {
  const ModelConfig& m = cfg_;
  const MoeDims d = moe_dims(m);
  const std::int64_t T = m.tokens(), R = d.rows(), E = d.experts, k = d.top_k, f = m.moe.ffn, h = m.hidden;
  const bool gated = m.gated_mlp();
  const int up = static_cast<int>(gated ? 2 * f : f);
  const std::size_t first_step = steps_.size();
  int logits = add_tensor("moe.logits", m.dtype, T * E, moe_formula(E, false));
  add_step(linear("moe.router", in, logits, "mlp.router", m.moe.router_bias, T, m.hidden, static_cast<int>(E)));
  int weights = add_tensor("moe.weights", m.dtype, T * k, moe_formula(k, false));
  int routing = add_tensor("moe.routing", DType::I32, m.moe.routing_entries(T), "4·(2·s·b·k + 2·E)");
  StepDef route = step("moe.route", OpKind::MoeRoute, {logits}, {weights, routing});
  if (m.moe.score_bias) route.b = "mlp.router.bias";  // the selection bias: read, never trained
  route.M = T;
  route.K = static_cast<int>(k);
  route.N = static_cast<int>(E);
  add_step(route);
  int xp = add_tensor("moe.xp", m.dtype, R * h, moe_formula(h, true));
  StepDef perm = step("moe.permute", OpKind::MoePermute, d.weight_input ? std::vector<int>{in, routing, weights} : std::vector<int>{in, routing}, {xp});
  perm.M = T * k;
  perm.K = static_cast<int>(h);
  perm.N = static_cast<int>(R);
  add_step(perm);
  auto expert = [&](const std::string& name, int x, int y, const std::string& w, int K, int N) {
    StepDef s = step(name, OpKind::ExpertLinear, {x, routing}, {y});
    s.w = w;
    if (m.moe.expert_bias) s.b = w.substr(0, w.size() - 1) + "b";  // mlp.experts.fc.b
    s.M = R;
    s.K = K;
    s.N = N;
    return s;
  };
  int gu = add_tensor(gated ? "moe.gate_up" : "moe.fc_out", m.dtype, R * up, moe_formula(up, true));
  add_step(expert("moe.fc", xp, gu, "mlp.experts.fc.w", static_cast<int>(h), up));
  int act = add_tensor("moe.act", m.dtype, R * f, moe_formula(f, true));
  const auto [act_name, act_op] = mlp_activation(m.mlp);
  StepDef a = step(std::string("moe.") + (act_name + 4), act_op, {gu}, {act});
  a.M = gated ? R : R * f;
  a.K = gated ? static_cast<int>(f) : 1;
  const int act_step = add_step(a);
  int yp = add_tensor("moe.down_out", m.dtype, R * h, moe_formula(h, true));
  add_step(expert("moe.fc2", act, yp, "mlp.experts.fc2.w", static_cast<int>(f), static_cast<int>(h)));
  for (std::size_t st = first_step; st < steps_.size(); ++st) steps_[st].module = "moe";
  steps_[static_cast<std::size_t>(act_step)].module = "moe_act";
  std::vector<int> un_in = {yp, weights, routing};
  if (m.moe.shared_ffn > 0) un_in.push_back(build_shared_experts(in));
  int out = add_tensor("moe.out", m.dtype, T * h, moe_formula(h, false));
  StepDef un = step("moe.unpermute", OpKind::MoeUnpermute, un_in, {out});
  un.M = T * k;
  un.K = static_cast<int>(h);
  un.N = static_cast<int>(R);
  un.module = "moe";
  add_step(un);
  return out;
}

// The shared experts of a mixture (Megatron-LM's module `shared_experts`): an MLP of width
// shared_ffn on every token, its output times sigmoid(in · g) with the gate.
int BlockGraph::build_shared_experts(int in) {
  const ModelConfig& m = cfg_;
  const std::int64_t T = m.tokens(), sf = m.moe.shared_ffn;
  const bool gated = m.gated_mlp();
  const int up = static_cast<int>(gated ? 2 * sf : sf);
  const std::size_t first_step = steps_.size();
  int gu = add_tensor(gated ? "moe.shared_gate_up" : "moe.shared_fc_out", m.dtype, T * up, formula(dtype_size(m.dtype), up / sf, "s·b·f_s"));
  add_step(linear("moe.shared_fc", in, gu, "mlp.shared.fc", false, T, m.hidden, up));
  int act = add_tensor("moe.shared_act", m.dtype, T * sf, formula(dtype_size(m.dtype), 1, "s·b·f_s"));
  const auto [act_name, act_op] = mlp_activation(m.mlp);
  StepDef a = step(std::string("moe.shared_") + (act_name + 4), act_op, {gu}, {act});
  a.M = gated ? T : T * sf;
  a.K = gated ? static_cast<int>(sf) : 1;
  add_step(a);
  int out = add_tensor("moe.shared_out", m.dtype, T * m.hidden, moe_formula(m.hidden, false));
  add_step(linear("moe.shared_fc2", act, out, "mlp.shared.fc2", false, T, static_cast<int>(sf), m.hidden));
  if (m.moe.shared_gate) {
    int g = add_tensor("moe.shared_gate", m.dtype, T, formula(dtype_size(m.dtype), 1, "s·b"));
    add_step(linear("moe.shared_gate", in, g, "mlp.shared_gate", false, T, m.hidden, 1));
    int gated_out = add_tensor("moe.shared_gated", m.dtype, T * m.hidden, moe_formula(m.hidden, false));
    StepDef sg = step("moe.shared_sigmoid", OpKind::SigmoidGate, {out, g}, {gated_out});
    sg.M = T;
    sg.K = m.hidden;
    add_step(sg);
    out = gated_out;
  }
  for (std::size_t st = first_step; st < steps_.size(); ++st) steps_[st].module = "shared_experts";
  return out;
}

void BlockGraph::build() {
  const ModelConfig& m = cfg_;
  const std::int64_t bs = m.tokens(), n = bs * m.hidden;
  const bool pre = m.placement != NormPlacement::Post, post = m.placement != NormPlacement::Pre;
  const bool rope = rope_;
  const bool l2 = m.qk_norm == QkNormKind::HeadL2, qkn = m.qk_norm != QkNormKind::None && (!l2 || rope);
  const bool temp = !rope && m.attn_temperature_floor > 0 && !m.mla.on();  // Llama 4's, without RoPE
  input_ = add_tensor("block.in", m.dtype, n, width_formula(m.hidden));
  int x = pre ? norm_step("ln1", "ln1.out", input_, "layernorm") : input_;
  const int w = m.qkv_width();
  int qkv = m.mla.on() ? build_latent_qkv(x) : -1;
  if (qkv < 0) {
    qkv = add_tensor(rope || qkn || temp ? "attn.qkv_raw" : "attn.qkv", m.dtype, bs * w, width_formula(w));
    add_step(linear("attn.qkv", x, qkv, "attn.qkv", m.qkv_bias, bs, m.hidden, w));
  }
  // Between the projection and the attention, in order, each step's output the next one's input
  // and the last one's attn.qkv: the QK-norm, then the temperature (a block without RoPE) or RoPE;
  // Llama 4's L2 norm after RoPE, as Hugging Face (RoPE's attention scaling then reaches no score).
  enum class Pre { Norm, Temperature, Rope };
  std::vector<Pre> before;
  const bool rotates = rope && !m.mla.on();
  if (qkn && !l2) before.push_back(Pre::Norm);
  if (temp) before.push_back(Pre::Temperature);
  if (rotates) before.push_back(Pre::Rope);
  if (qkn && l2) before.push_back(Pre::Norm);
  for (std::size_t i = 0; i < before.size(); ++i) {
    const char* name = i + 1 == before.size()         ? "attn.qkv"
                       : before[i] == Pre::Norm        ? "attn.qkv_normed"
                       : before[i] == Pre::Rope        ? "attn.qkv_roped"
                                                    : "attn.qkv_tempered";
    const int o = add_tensor(name, m.dtype, bs * w, width_formula(w));
    StepDef s;
    if (before[i] == Pre::Norm) {
      const bool heads = m.qk_norm == QkNormKind::Head || l2;
      s = step("attn.qk_norm", heads ? OpKind::QkHeadNorm : OpKind::QkNorm, {qkv}, {o});
      if (!l2) {  // the L2 norm has no weight
        s.w = "attn.q_norm.w";
        s.b = "attn.k_norm.w";
      }
      s.w_offset = m.qk_norm == QkNormKind::Head && m.norm_unit_offset ? 1.0f : 0.0f;
      s.K = m.q_width();
      s.N = m.kv_width();
    } else if (before[i] == Pre::Temperature) {  // the q heads times their position's temperature: a Rope step without rotation
      s = step("attn.temperature", OpKind::Rope, {qkv}, {o});
      s.K = m.heads * m.head_dim();  // the q elements, counted as RoPE counts a rotated one
    } else {
      s = step("attn.rope", OpKind::Rope, {qkv}, {o});
      s.K = (m.heads + m.kv_heads) * m.rotary_dim();
    }
    s.M = bs;
    add_step(s);
    qkv = o;
  }
  int ctx = build_attention(qkv);
  int proj = add_tensor("attn.proj_out", m.dtype, n, width_formula(m.hidden));
  add_step(linear("attn.proj", ctx, proj, "attn.proj", m.out_bias, bs,
                  m.ctx_width(), m.hidden));
  if (m.block_layout != BlockLayout::Sequential) {
    // Parallel: the attention's sum first (its output is freed), then the MLP of the block's
    // input, normed on its own or (shared norm) by ln1 already.
    int mid = residual_step("attn.residual", input_, proj, "attn.residual_out", kSiteAttentionResidual);
    x = m.block_layout == BlockLayout::Parallel
            ? norm_step("ln2", "ln2.out", input_, "layernorm") : x;
    output_ = residual_step("mlp.residual", mid, build_mlp(x), "block.out", kSiteMlpResidual);
    return;
  }
  if (post) proj = norm_step("attn.post_norm", "attn.post_norm_out", proj);
  int mid = residual_step("attn.residual", input_, proj, "ln2.in", kSiteAttentionResidual);
  x = pre ? norm_step("ln2", "ln2.out", mid, "layernorm") : mid;
  int down = moe_ ? build_moe(x) : build_mlp(x);
  if (post) down = norm_step("mlp.post_norm", "mlp.post_norm_out", down);
  output_ = residual_step("mlp.residual", mid, down, "block.out", kSiteMlpResidual);
}

void BlockGraph::finish() {
  for (int s = 0; s < static_cast<int>(steps_.size()); ++s) {
    StepDef& st = steps_[s];
    const OpTraits& info = op_traits(st.op);
    st.kind = info.kind;
    st.needs.clear();
    for (std::size_t k = 0; k < st.in.size(); ++k)
      if ((info.reads_in >> k) & 1u) st.needs.push_back(st.in[k]);
    for (std::size_t k = 0; k < st.out.size(); ++k)
      if ((info.reads_out >> k) & 1u) st.needs.push_back(st.out[k]);
    st.flops_fwd = info.flops_fwd(st);
    st.flops_bwd = info.flops_bwd(st);
    StepDef full = st;
    full.sq = st.sq_full;
    st.flops_fwd_full = info.flops_fwd(full);
    st.flops_bwd_full = info.flops_bwd(full);
    for (int t : st.out) tensors_[t].producer = s;
    for (int t : st.in) tensors_[t].consumers.push_back(s);
    for (int t : st.needs) tensors_[t].saved = true;
  }
  tensors_[output_].saved = false;  // it is the next block's input
  last_need_.assign(tensors_.size(), -1);
  for (int s = static_cast<int>(steps_.size()) - 1; s >= 0; --s)
    for (int t : steps_[static_cast<std::size_t>(s)].needs) last_need_[static_cast<std::size_t>(t)] = s;
}

std::optional<int> BlockGraph::find(const std::string& tensor) const {
  for (int i = 0; i < static_cast<int>(tensors_.size()); ++i)
    if (tensors_[i].name == tensor) return i;
  return std::nullopt;
}

std::uint64_t BlockGraph::saved_bytes() const { return saved_bytes_without({}); }

std::uint64_t BlockGraph::saved_bytes_without(const std::vector<std::string>& recompute) const {
  std::uint64_t total = 0;
  for (const auto& t : tensors_)
    if (t.saved && std::find(recompute.begin(), recompute.end(), t.name) == recompute.end())
      total += t.bytes;
  return total;
}

std::uint64_t BlockGraph::flops_forward(int block) const {
  std::uint64_t f = 0;
  for (const auto& s : of(block).steps_) f += s.fwd_flops(windowed(block));
  return f;
}

std::uint64_t BlockGraph::flops_backward(int block) const {
  std::uint64_t f = 0;
  for (const auto& s : of(block).steps_) f += s.bwd_flops(windowed(block));
  return f;
}

std::optional<std::uint64_t> BlockGraph::recompute_flops(const std::vector<bool>& live,
                                                         const std::vector<bool>& targets,
                                                         std::vector<int>* steps,
                                                         int block) const {
  std::vector<bool> needed(tensors_.size(), false);
  for (std::size_t t = 0; t < tensors_.size(); ++t) needed[t] = targets[t] && !live[t];
  std::vector<bool> run(steps_.size(), false);
  for (int s = static_cast<int>(steps_.size()) - 1; s >= 0; --s) {
    bool any = false;
    for (int t : steps_[s].out) any = any || needed[t];
    if (!any) continue;
    run[s] = true;
    for (int t : steps_[s].in)
      if (!live[t]) needed[t] = true;
  }
  if (needed[input_] && !live[input_]) return std::nullopt;
  std::uint64_t flops = 0;
  if (steps) steps->clear();
  for (std::size_t s = 0; s < steps_.size(); ++s)
    if (run[s]) {
      flops += steps_[s].fwd_flops(windowed(block));
      if (steps) steps->push_back(static_cast<int>(s));
    }
  return flops;
}

std::vector<std::string> BlockGraph::saved_names() const {
  std::vector<std::string> n;
  for (const auto& t : tensors_)
    if (t.saved) n.push_back(t.name);
  return n;
}

std::vector<std::string> BlockGraph::default_selective() const {
  std::vector<std::string> names;
  if (cfg_.attention == AttentionImpl::Naive) {
    for (const char* t : {"attn.probs", "attn.drop_mask", "attn.drop_out"})
      if (find(t)) names.push_back(t);
  } else {
    for (const char* t : {"ln1.out", "ln2.out", "mlp.gelu_out", "mlp.act"})
      if (find(t) && tensors_[*find(t)].saved) names.push_back(t);
  }
  return names;
}

std::vector<RecomputeModule> BlockGraph::recompute_modules() const {
  std::vector<RecomputeModule> out;
  for (const char* name : kRecomputeModules) {
    const std::string mod = name;
    // The whole layer (moe) holds its activation (moe_act) and shared experts too.
    auto inside = [&](int s) {
      const std::string& sm = steps_[static_cast<std::size_t>(s)].module;
      return sm == mod || (mod == "moe" && (sm == "moe_act" || sm == "shared_experts"));
    };
    RecomputeModule r{mod, {}};
    for (const TensorDef& t : tensors_) {
      if (!t.saved || t.producer < 0 || !inside(t.producer)) continue;
      bool only_inside = true;  // every backward that reads it is the module's
      for (int s = 0; s < static_cast<int>(steps_.size()); ++s) {
        const auto& n = steps_[static_cast<std::size_t>(s)].needs;
        if (!inside(s) && std::find(n.begin(), n.end(), &t - tensors_.data()) != n.end()) only_inside = false;
      }
      if (mod == "layernorm" || mod == "moe_act" || mod == "mla_up_proj" || only_inside) r.tensors.push_back(t.name);
    }
    if (!r.tensors.empty()) out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> BlockGraph::module_tensors(const std::vector<std::string>& modules) const {
  const std::vector<RecomputeModule> has = recompute_modules();
  std::vector<bool> pick(tensors_.size(), false);
  for (const std::string& name : modules) {
    auto it = std::find_if(has.begin(), has.end(), [&](const RecomputeModule& r) { return r.name == name; });
    if (it == has.end()) {
      std::string list;
      for (const RecomputeModule& r : has) list += (list.empty() ? "" : ", ") + r.name;
      const bool known = std::find_if(std::begin(kRecomputeModules), std::end(kRecomputeModules),
                                      [&](const char* k) { return name == k; }) != std::end(kRecomputeModules);
      throw Error("'" + name + "' is " + (known ? "a module this model's blocks do not have" :
                                                  "not one of Megatron-LM's recompute modules") +
                  " (its blocks have: " + (list.empty() ? "none" : list) + ")");
    }
    for (const std::string& t : it->tensors) pick[static_cast<std::size_t>(*find(t))] = true;
  }
  std::vector<std::string> out;
  for (std::size_t t = 0; t < tensors_.size(); ++t)
    if (pick[t]) out.push_back(tensors_[t].name);
  return out;
}

BlockGraph BlockGraph::from_table(const ModelConfig& m, std::vector<TensorDef> tensors,
                                  std::vector<StepDef> steps, int input, int output) {
  BlockGraph g(m);
  g.tensors_.clear();
  g.steps_.clear();
  g.variants_.clear();
  const int n = static_cast<int>(tensors.size());
  auto check = [n](int t, const std::string& what) {
    if (t < 0 || t >= n)
      throw Error("block table: " + what + " refers to tensor " + std::to_string(t) +
                  ", the table has " + std::to_string(n));
  };
  check(input, "the block input");
  check(output, "the block output");
  for (auto& t : tensors) g.add_tensor(t.name, t.dtype, t.numel, std::move(t.formula));
  for (auto& s : steps) {
    for (const auto* list : {&s.in, &s.out, &s.needs})
      for (int t : *list) check(t, "step '" + s.name + "'");
    g.add_step(std::move(s));
  }
  g.input_ = input;
  g.output_ = output;
  g.finish();
  return g;
}

}  // namespace remat
