#include "core/model/param_layout.h"

namespace remat {

const char* to_string(ParamSlot s) {
  static const char* names[] = {"ln1.w", "ln1.b", "attn.qkv.w", "attn.qkv.b", "attn.proj.w",
                                "attn.proj.b", "ln2.w", "ln2.b", "mlp.fc.w", "mlp.fc.b",
                                "mlp.fc2.w", "mlp.fc2.b"};
  return names[static_cast<int>(s)];
}

std::int64_t ParamLayout::add(ParamSpec p) {
  p.offset = total_;
  total_ += p.numel();
  params_.push_back(std::move(p));
  return params_.back().offset;
}

ParamLayout::ParamLayout(const ModelConfig& m) {
  const std::int64_t h = m.hidden, f = m.ffn, V = m.vocab, d = m.head_dim();
  const int kSlots = static_cast<int>(ParamSlot::Count);
  slots_.assign(static_cast<std::size_t>(m.layers) * kSlots, -1);
  sizes_.assign(static_cast<std::size_t>(m.layers) * kSlots, 0);
  auto slot = [&](int b, ParamSlot s, ParamSpec p) {
    p.block = b;
    std::size_t i = static_cast<std::size_t>(b) * kSlots + static_cast<int>(s);
    sizes_[i] = p.numel();
    slots_[i] = add(std::move(p));
  };
  if (m.arch == Architecture::Gpt2) {
    wte = add({"wte", "transformer.wte.weight", V, h, 0, -1, true});
    wpe = add({"wpe", "transformer.wpe.weight", m.positions, h, 0, -1, true});
    for (int b = 0; b < m.layers; ++b) {
      std::string p = "h." + std::to_string(b) + ".";
      std::string hf = "transformer.h." + std::to_string(b) + ".";
      slot(b, ParamSlot::Ln1W, {p + "ln1.w", hf + "ln_1.weight", h, 1});
      slot(b, ParamSlot::Ln1B, {p + "ln1.b", hf + "ln_1.bias", h, 1});
      slot(b, ParamSlot::QkvW, {p + "attn.qkv.w", hf + "attn.c_attn.weight", 3 * h, h, 0, b, true, true});
      slot(b, ParamSlot::QkvB, {p + "attn.qkv.b", hf + "attn.c_attn.bias", 3 * h, 1});
      slot(b, ParamSlot::ProjW, {p + "attn.proj.w", hf + "attn.c_proj.weight", h, h, 0, b, true, true});
      slot(b, ParamSlot::ProjB, {p + "attn.proj.b", hf + "attn.c_proj.bias", h, 1});
      slot(b, ParamSlot::Ln2W, {p + "ln2.w", hf + "ln_2.weight", h, 1});
      slot(b, ParamSlot::Ln2B, {p + "ln2.b", hf + "ln_2.bias", h, 1});
      slot(b, ParamSlot::FcW, {p + "mlp.fc.w", hf + "mlp.c_fc.weight", f, h, 0, b, true, true});
      slot(b, ParamSlot::FcB, {p + "mlp.fc.b", hf + "mlp.c_fc.bias", f, 1});
      slot(b, ParamSlot::Fc2W, {p + "mlp.fc2.w", hf + "mlp.c_proj.weight", h, f, 0, b, true, true});
      slot(b, ParamSlot::Fc2B, {p + "mlp.fc2.b", hf + "mlp.c_proj.bias", h, 1});
    }
    lnf_w = add({"lnf.w", "transformer.ln_f.weight", h, 1});
    lnf_b = add({"lnf.b", "transformer.ln_f.bias", h, 1});
  } else {
    const std::int64_t q = m.heads * d, kv = m.kv_heads * d;
    wte = add({"wte", "model.embed_tokens.weight", V, h, 0, -1, true});
    for (int b = 0; b < m.layers; ++b) {
      std::string p = "h." + std::to_string(b) + ".";
      std::string hf = "model.layers." + std::to_string(b) + ".";
      slot(b, ParamSlot::Ln1W, {p + "ln1.w", hf + "input_layernorm.weight", h, 1});
      ParamSpec qkv{p + "attn.qkv.w", hf + "self_attn.q_proj.weight", q + 2 * kv, h, 0, b, true};
      qkv.hf_parts = {{hf + "self_attn.q_proj.weight", q},
                      {hf + "self_attn.k_proj.weight", kv},
                      {hf + "self_attn.v_proj.weight", kv}};
      slot(b, ParamSlot::QkvW, qkv);
      slot(b, ParamSlot::ProjW, {p + "attn.proj.w", hf + "self_attn.o_proj.weight", h, q, 0, b, true});
      slot(b, ParamSlot::Ln2W, {p + "ln2.w", hf + "post_attention_layernorm.weight", h, 1});
      ParamSpec gu{p + "mlp.fc.w", hf + "mlp.gate_proj.weight", 2 * f, h, 0, b, true};
      gu.hf_parts = {{hf + "mlp.gate_proj.weight", f}, {hf + "mlp.up_proj.weight", f}};
      slot(b, ParamSlot::FcW, gu);
      slot(b, ParamSlot::Fc2W, {p + "mlp.fc2.w", hf + "mlp.down_proj.weight", h, f, 0, b, true});
    }
    lnf_w = add({"lnf.w", "model.norm.weight", h, 1});
    lm_head = add({"lm_head", "lm_head.weight", V, h, 0, -1, true});
  }
}

std::int64_t ParamLayout::offset(int block, ParamSlot slot) const {
  return slots_[static_cast<std::size_t>(block) * static_cast<int>(ParamSlot::Count) +
                static_cast<int>(slot)];
}

std::int64_t ParamLayout::numel(int block, ParamSlot slot) const {
  return sizes_[static_cast<std::size_t>(block) * static_cast<int>(ParamSlot::Count) +
                static_cast<int>(slot)];
}

const ParamSpec* ParamLayout::find(const std::string& name) const {
  for (const auto& p : params_)
    if (p.name == name || p.hf_name == name) return &p;
  return nullptr;
}

}  // namespace remat
