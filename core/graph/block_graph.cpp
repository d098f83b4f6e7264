#include "core/graph/block_graph.h"

#include <algorithm>
#include <set>

#include "core/util/error.h"

namespace remat {

const char* to_string(OpKind k) {
  static const char* n[] = {"layernorm", "rmsnorm",  "linear",   "rope", "attn_softmax",
                            "attn_dropout", "attn_pv", "flash_attn", "residual", "gelu",
                            "swiglu", "dropout_mask"};
  return n[static_cast<int>(k)];
}

const char* to_string(StepKind k) {
  static const char* n[] = {"gemm", "norm", "softmax", "dropout", "activation", "attention",
                            "elementwise"};
  return n[static_cast<int>(k)];
}

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
  embed_mask = m.has_dropout() ? bsh : 0;
  final_in = bsh;
  lnf_out = bsh;
  losses = bs;
}

BlockGraph::BlockGraph(const ModelConfig& m) : cfg_(m) {
  if (m.arch == Architecture::Gpt2) build_gpt2();
  else build_llama();
  finish();
}

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

void BlockGraph::build_attention(int qkv, int& ctx) {
  const ModelConfig& m = cfg_;
  const DType act = m.dtype;
  const std::uint64_t e = dtype_size(act);
  const std::int64_t B = m.batch, S = m.seq, a = m.heads, d = m.head_dim(), bs = B * S;
  const std::int64_t probs_n = B * a * S * S;
  const std::uint64_t mm = 2ull * B * a * S * S * d;  // one S x S x d product, all heads
  ctx = add_tensor("attn.ctx", act, bs * m.hidden, formula(e, 1, "s·b·h"));
  if (m.attention == AttentionImpl::Naive) {
    int probs = add_tensor("attn.probs", act, probs_n, formula(e, 1, "a·s²·b"));
    StepDef sm{"attn.softmax", OpKind::AttnSoftmax, StepKind::Softmax, {qkv}, {probs},
               {qkv, probs}};
    sm.flops_fwd = mm + 5ull * probs_n;
    sm.flops_bwd = 2 * mm + 4ull * probs_n;
    add_step(sm);
    int p = probs;
    if (m.has_dropout()) {
      int mask = add_tensor("attn.drop_mask", DType::U8, probs_n, "a·s²·b");
      add_step(mask_step("attn.drop_mask", mask, kSiteAttentionProbs, probs_n));
      int out = add_tensor("attn.drop_out", act, probs_n, formula(e, 1, "a·s²·b"));
      StepDef dr{"attn.dropout", OpKind::AttnDropout, StepKind::Dropout, {probs, mask}, {out},
                 {mask}};
      dr.site = kSiteAttentionProbs;
      dr.M = probs_n;
      dr.flops_fwd = 2ull * probs_n;
      dr.flops_bwd = 1ull * probs_n;
      add_step(dr);
      p = out;
    }
    StepDef pv{"attn.pv", OpKind::AttnPV, StepKind::Attention, {p, qkv}, {ctx}, {p, qkv}};
    pv.flops_fwd = mm;
    pv.flops_bwd = 2 * mm;
    add_step(pv);
  } else {
    int lse = add_tensor("attn.lse", DType::F32, B * a * S, "4·a·s·b");
    StepDef fa{"attn.flash", OpKind::FlashAttn, StepKind::Attention, {qkv}, {ctx, lse},
               {qkv, ctx, lse}};
    fa.site = kSiteAttentionProbs;
    fa.flops_fwd = mm;            // causal: half of the two S x S x d products
    fa.flops_bwd = 5 * mm / 2;    // recomputed scores, dV, dP, dQ, dK
    add_step(fa);
  }
}

namespace {

}  // namespace

// A dropout mask depends only on its Philox key, so rebuilding it never needs other tensors.
StepDef mask_step(const std::string& name, int mask, DropoutSite site, std::int64_t n) {
  StepDef s{name, OpKind::DropoutMask, StepKind::Dropout, {}, {mask}, {}};
  s.site = site;
  s.M = n;
  s.flops_fwd = static_cast<std::uint64_t>(n);
  return s;
}

namespace {

StepDef linear(const std::string& name, int in, int out, ParamSlot w, ParamSlot b,
               std::int64_t M, int K, int N) {
  StepDef s{name, OpKind::Linear, StepKind::Gemm, {in}, {out}, {in}};
  s.w = w;
  s.b = b;
  s.M = M;
  s.K = K;
  s.N = N;
  std::uint64_t mkn = static_cast<std::uint64_t>(M) * K * N;
  s.flops_fwd = 2 * mkn + (b != ParamSlot::Count ? static_cast<std::uint64_t>(M) * N : 0);
  s.flops_bwd = 4 * mkn + (b != ParamSlot::Count ? static_cast<std::uint64_t>(M) * N : 0);
  return s;
}

StepDef norm(const std::string& name, OpKind op, int in, int out, ParamSlot w, ParamSlot b,
             std::int64_t M, int H) {
  StepDef s{name, op, StepKind::Norm, {in}, {out}, {in}};
  s.w = w;
  s.b = b;
  s.M = M;
  s.K = H;
  std::uint64_t n = static_cast<std::uint64_t>(M) * H;
  s.flops_fwd = (op == OpKind::LayerNorm ? 8 : 5) * n;
  s.flops_bwd = (op == OpKind::LayerNorm ? 14 : 10) * n;
  return s;
}

StepDef residual(const std::string& name, int res, int x, int out, int mask, DropoutSite site,
                 std::int64_t n) {
  StepDef s{name, OpKind::Residual, StepKind::Elementwise, {res, x}, {out}, {}};
  if (mask >= 0) {
    s.in.push_back(mask);
    s.needs.push_back(mask);
  }
  s.site = site;
  s.M = n;
  s.flops_fwd = 2ull * n;
  s.flops_bwd = 2ull * n;
  return s;
}

}  // namespace

void BlockGraph::build_gpt2() {
  const ModelConfig& m = cfg_;
  const DType act = m.dtype;
  const std::uint64_t e = dtype_size(act);
  const std::int64_t bs = m.tokens(), h = m.hidden, f = m.ffn, n = bs * h;
  const bool drop = m.has_dropout();
  input_ = add_tensor("block.in", act, n, formula(e, 1, "s·b·h"));
  int ln1 = add_tensor("ln1.out", act, n, formula(e, 1, "s·b·h"));
  int qkv = add_tensor("attn.qkv", act, bs * m.qkv_width(), formula(e, 3, "s·b·h"));
  add_step(norm("ln1", OpKind::LayerNorm, input_, ln1, ParamSlot::Ln1W, ParamSlot::Ln1B, bs, m.hidden));
  add_step(linear("attn.qkv", ln1, qkv, ParamSlot::QkvW, ParamSlot::QkvB, bs, m.hidden, m.qkv_width()));
  int ctx = -1;
  build_attention(qkv, ctx);
  int proj = add_tensor("attn.proj_out", act, n, formula(e, 1, "s·b·h"));
  add_step(linear("attn.proj", ctx, proj, ParamSlot::ProjW, ParamSlot::ProjB, bs, m.hidden, m.hidden));
  int ln2in = add_tensor("ln2.in", act, n, formula(e, 1, "s·b·h"));
  int rmask1 = drop ? add_tensor("attn.res_mask", DType::U8, n, "s·b·h") : -1;
  if (drop) add_step(mask_step("attn.res_mask", rmask1, kSiteAttentionResidual, n));
  add_step(residual("attn.residual", input_, proj, ln2in, rmask1, kSiteAttentionResidual, n));
  int ln2 = add_tensor("ln2.out", act, n, formula(e, 1, "s·b·h"));
  add_step(norm("ln2", OpKind::LayerNorm, ln2in, ln2, ParamSlot::Ln2W, ParamSlot::Ln2B, bs, m.hidden));
  std::string fb = f == 4 * h ? "s·b·h" : "s·b·f";
  std::int64_t fm = f == 4 * h ? 4 : 1;
  int gin = add_tensor("mlp.gelu_in", act, bs * f, formula(e, fm, fb));
  add_step(linear("mlp.fc", ln2, gin, ParamSlot::FcW, ParamSlot::FcB, bs, m.hidden, m.ffn));
  int gout = add_tensor("mlp.gelu_out", act, bs * f, formula(e, fm, fb));
  StepDef g{"mlp.gelu", OpKind::Gelu, StepKind::Activation, {gin}, {gout}, {gin}};
  g.M = bs * f;
  g.flops_fwd = 8ull * bs * f;
  g.flops_bwd = 16ull * bs * f;
  add_step(g);
  int fc2 = add_tensor("mlp.fc2_out", act, n, formula(e, 1, "s·b·h"));
  add_step(linear("mlp.fc2", gout, fc2, ParamSlot::Fc2W, ParamSlot::Fc2B, bs, m.ffn, m.hidden));
  output_ = add_tensor("block.out", act, n, formula(e, 1, "s·b·h"));
  int rmask2 = drop ? add_tensor("mlp.res_mask", DType::U8, n, "s·b·h") : -1;
  if (drop) add_step(mask_step("mlp.res_mask", rmask2, kSiteMlpResidual, n));
  add_step(residual("mlp.residual", ln2in, fc2, output_, rmask2, kSiteMlpResidual, n));
}

void BlockGraph::build_llama() {
  const ModelConfig& m = cfg_;
  const DType act = m.dtype;
  const std::uint64_t e = dtype_size(act);
  const std::int64_t bs = m.tokens(), n = bs * m.hidden, f = m.ffn;
  const bool drop = m.has_dropout();
  std::string qkv_f = m.kv_heads == m.heads ? formula(e, 3, "s·b·h")
                                            : formula(e, 1, "s·b·(h+2·kv·d)");
  input_ = add_tensor("block.in", act, n, formula(e, 1, "s·b·h"));
  int ln1 = add_tensor("ln1.out", act, n, formula(e, 1, "s·b·h"));
  add_step(norm("ln1", OpKind::RmsNorm, input_, ln1, ParamSlot::Ln1W, ParamSlot::Count, bs, m.hidden));
  int raw = add_tensor("attn.qkv_raw", act, bs * m.qkv_width(), qkv_f);
  add_step(linear("attn.qkv", ln1, raw, ParamSlot::QkvW, ParamSlot::Count, bs, m.hidden, m.qkv_width()));
  int qkv = add_tensor("attn.qkv", act, bs * m.qkv_width(), qkv_f);
  StepDef r{"attn.rope", OpKind::Rope, StepKind::Elementwise, {raw}, {qkv}, {}};
  r.M = bs * m.qkv_width();
  r.flops_fwd = 6ull * bs * (m.heads + m.kv_heads) * m.head_dim();
  r.flops_bwd = r.flops_fwd;
  add_step(r);
  int ctx = -1;
  build_attention(qkv, ctx);
  int proj = add_tensor("attn.proj_out", act, n, formula(e, 1, "s·b·h"));
  add_step(linear("attn.proj", ctx, proj, ParamSlot::ProjW, ParamSlot::Count, bs, m.hidden, m.hidden));
  int ln2in = add_tensor("ln2.in", act, n, formula(e, 1, "s·b·h"));
  int rmask1 = drop ? add_tensor("attn.res_mask", DType::U8, n, "s·b·h") : -1;
  if (drop) add_step(mask_step("attn.res_mask", rmask1, kSiteAttentionResidual, n));
  add_step(residual("attn.residual", input_, proj, ln2in, rmask1, kSiteAttentionResidual, n));
  int ln2 = add_tensor("ln2.out", act, n, formula(e, 1, "s·b·h"));
  add_step(norm("ln2", OpKind::RmsNorm, ln2in, ln2, ParamSlot::Ln2W, ParamSlot::Count, bs, m.hidden));
  int gu = add_tensor("mlp.gate_up", act, bs * 2 * f, formula(e, 2, "s·b·f"));
  add_step(linear("mlp.gate_up", ln2, gu, ParamSlot::FcW, ParamSlot::Count, bs, m.hidden, 2 * m.ffn));
  int sw = add_tensor("mlp.act", act, bs * f, formula(e, 1, "s·b·f"));
  StepDef s{"mlp.swiglu", OpKind::SwiGlu, StepKind::Activation, {gu}, {sw}, {gu}};
  s.M = bs;
  s.K = m.ffn;
  s.flops_fwd = 6ull * bs * f;
  s.flops_bwd = 12ull * bs * f;
  add_step(s);
  int down = add_tensor("mlp.down_out", act, n, formula(e, 1, "s·b·h"));
  add_step(linear("mlp.down", sw, down, ParamSlot::Fc2W, ParamSlot::Count, bs, m.ffn, m.hidden));
  output_ = add_tensor("block.out", act, n, formula(e, 1, "s·b·h"));
  int rmask2 = drop ? add_tensor("mlp.res_mask", DType::U8, n, "s·b·h") : -1;
  if (drop) add_step(mask_step("mlp.res_mask", rmask2, kSiteMlpResidual, n));
  add_step(residual("mlp.residual", ln2in, down, output_, rmask2, kSiteMlpResidual, n));
}

void BlockGraph::finish() {
  for (int s = 0; s < static_cast<int>(steps_.size()); ++s) {
    for (int t : steps_[s].out) tensors_[t].producer = s;
    for (int t : steps_[s].in) tensors_[t].consumers.push_back(s);
    for (int t : steps_[s].needs) tensors_[t].saved = true;
  }
  tensors_[output_].saved = false;  // it is the next block's input
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

std::uint64_t BlockGraph::flops_forward() const {
  std::uint64_t f = 0;
  for (const auto& s : steps_) f += s.flops_fwd;
  return f;
}

std::uint64_t BlockGraph::flops_backward() const {
  std::uint64_t f = 0;
  for (const auto& s : steps_) f += s.flops_bwd;
  return f;
}

std::optional<std::uint64_t> BlockGraph::recompute_flops(const std::vector<bool>& live,
                                                         const std::vector<bool>& targets,
                                                         std::vector<int>* steps) const {
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
      flops += steps_[s].flops_fwd;
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
  } else if (cfg_.arch == Architecture::Gpt2) {
    names = {"ln1.out", "ln2.out", "mlp.gelu_out"};
  } else {
    names = {"ln1.out", "ln2.out", "mlp.act"};
  }
  return names;
}

BlockGraph BlockGraph::from_table(const ModelConfig& m, std::vector<TensorDef> tensors,
                                  std::vector<StepDef> steps, int input, int output) {
  BlockGraph g(m);
  g.tensors_.clear();
  g.steps_.clear();
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
