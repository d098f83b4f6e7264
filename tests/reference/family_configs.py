"""The tiny Hugging Face config.json of every family the float64 reference (families.py) knows
(`FAMILIES`), and the step's shape (SEQ, BATCH).

Tiny sizes shared by every family: 2 layers, hidden 32, 4 heads, vocab 64. Each config is a
Hugging Face config.json as the family's published configs write it (field names and kinds of
values), shrunk; sizes that make a feature visible at seq 16 are noted.
"""
_LLAMA_LIKE = {"hidden_size": 32, "intermediate_size": 56, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 64,
               "hidden_act": "silu", "attention_dropout": 0.0, "initializer_range": 0.02,
               "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32", "use_cache": True,
               "transformers_version": "4.46.0"}

FAMILIES = {
    "gpt2": {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 2, "n_embd": 32,
        "n_head": 4, "n_positions": 24, "n_ctx": 24, "n_inner": None, "vocab_size": 64,
        "activation_function": "gelu_new", "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
        "layer_norm_epsilon": 1e-5, "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
        "initializer_range": 0.02, "bos_token_id": 63, "eos_token_id": 63, "use_cache": True},
    "llama": dict(_LLAMA_LIKE, model_type="llama", architectures=["LlamaForCausalLM"], head_dim=8,
                  max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
                  attention_bias=False, mlp_bias=False, pretraining_tp=1, tie_word_embeddings=False),
    # Llama 3.2's rope_scaling and tied head; original_max_position_embeddings 256 with theta
    # 500000 and head_dim 8 puts one frequency in each band (kept, smoothed, divided by factor).
    "llama3": dict(_LLAMA_LIKE, model_type="llama", architectures=["LlamaForCausalLM"], head_dim=8,
                   max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=500000.0,
                   rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                 "original_max_position_embeddings": 256, "rope_type": "llama3"},
                   attention_bias=False, mlp_bias=False, pretraining_tp=1, tie_word_embeddings=True),
    "mistral": dict(_LLAMA_LIKE, model_type="mistral", architectures=["MistralForCausalLM"], head_dim=8,
                    max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=1000000.0,
                    sliding_window=6, tie_word_embeddings=False),
    # Qwen2.5's long-context recipe (yarn under the legacy "type" key); the window fields are
    # present and off, as published. original 4096 with theta 1e6 gives a fractional ramp.
    "qwen2": dict(_LLAMA_LIKE, model_type="qwen2", architectures=["Qwen2ForCausalLM"],
                  intermediate_size=48, max_position_embeddings=16384, rms_norm_eps=1e-6,
                  rope_theta=1000000.0,
                  rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
                  use_sliding_window=False, sliding_window=131072, max_window_layers=2,
                  tie_word_embeddings=True),
    # head_dim 16 against hidden/heads = 8, multi-query (one kv head) as Gemma 2B.
    "gemma": dict(_LLAMA_LIKE, model_type="gemma", architectures=["GemmaForCausalLM"],
                  intermediate_size=64, num_key_value_heads=1, head_dim=16, max_position_embeddings=64,
                  rms_norm_eps=1e-6, rope_theta=10000.0, rope_scaling=None, hidden_act="gelu",
                  hidden_activation="gelu_pytorch_tanh", attention_bias=False, pad_token_id=0,
                  tie_word_embeddings=True),
    # Softcaps small enough to bend scores and logits of this size; query_pre_attn_scalar != head_dim.
    "gemma2": dict(_LLAMA_LIKE, model_type="gemma2", architectures=["Gemma2ForCausalLM"],
                   intermediate_size=64, head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6,
                   rope_theta=10000.0, hidden_act="gelu_pytorch_tanh",
                   hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=24, sliding_window=6,
                   attn_logit_softcapping=4.0, final_logit_softcapping=3.0, attention_bias=False,
                   cache_implementation="hybrid", pad_token_id=0, tie_word_embeddings=True),
    # Phi-4-mini's shape of config: partial rotary, longrope under "type", the pretrained length
    # as a top-level original_max_position_embeddings (seq 16 <= 32: short_factor applies, and
    # the attention factor comes from 128 / 32).
    "phi3": dict(_LLAMA_LIKE, model_type="phi3", architectures=["Phi3ForCausalLM"],
                 intermediate_size=48, max_position_embeddings=128, original_max_position_embeddings=32,
                 partial_rotary_factor=0.5, rms_norm_eps=1e-5, rope_theta=10000.0,
                 rope_scaling={"type": "longrope", "short_factor": [1.0, 1.5], "long_factor": [2.0, 6.0]},
                 sliding_window=2047, resid_pdrop=0.0, embd_pdrop=0.0, attention_bias=False,
                 pad_token_id=0, tie_word_embeddings=False),
    "olmo2": dict(_LLAMA_LIKE, model_type="olmo2", architectures=["Olmo2ForCausalLM"],
                  max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=500000.0, rope_scaling=None,
                  attention_bias=False, pad_token_id=0, tie_word_embeddings=False),
    # Qwen3-0.6B's shape of config: head_dim past hidden / heads (16 against 8), the window
    # fields present and off, a tied head.
    "qwen3": dict(_LLAMA_LIKE, model_type="qwen3", architectures=["Qwen3ForCausalLM"], head_dim=16,
                  max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0, rope_scaling=None,
                  attention_bias=False, use_sliding_window=False, sliding_window=None, max_window_layers=2,
                  tie_word_embeddings=True),
    # Granite 3's multipliers at this size: the score scale 1 / head_dim (as 1/128 at d = 128),
    # embeddings x 12, each branch x 0.22, logits / 16.
    "granite": dict(_LLAMA_LIKE, model_type="granite", architectures=["GraniteForCausalLM"],
                    max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000000.0, rope_scaling=None,
                    attention_bias=False, mlp_bias=False, embedding_multiplier=12.0,
                    attention_multiplier=0.125, residual_multiplier=0.22, logits_scaling=16.0,
                    pad_token_id=0, tie_word_embeddings=True),
    # Pythia's shape of config: half of each head rotated (rotary_pct), the parallel block, exact
    # GELU, biases everywhere, an untied embed_out.
    "gpt_neox": {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "hidden_size": 32,
                 "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "vocab_size": 64, "max_position_embeddings": 64, "rotary_pct": 0.5,
                 "rotary_emb_base": 10000, "layer_norm_eps": 1e-5, "hidden_act": "gelu",
                 "use_parallel_residual": True, "attention_dropout": 0.0, "hidden_dropout": 0.0,
                 "classifier_dropout": 0.1, "initializer_range": 0.02, "tie_word_embeddings": False,
                 "use_cache": True, "bos_token_id": 0, "eos_token_id": 0, "torch_dtype": "float16",
                 "transformers_version": "4.24.0"},
    # Gemma 3's text model: per-head QK-norm with (1 + w) weights, windowed layers but every
    # second (sliding_window_pattern 2 at this depth; 6 as published) on their own RoPE base
    # (rope_local_base_freq), the global ones under 27B's linear scaling, no soft-caps.
    "gemma3": dict(_LLAMA_LIKE, model_type="gemma3_text", architectures=["Gemma3ForCausalLM"],
                   intermediate_size=64, head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6,
                   rope_theta=1000000.0, rope_local_base_freq=10000.0,
                   rope_scaling={"factor": 8.0, "rope_type": "linear"}, hidden_activation="gelu_pytorch_tanh",
                   query_pre_attn_scalar=24, sliding_window=6, sliding_window_pattern=2,
                   attn_logit_softcapping=None, final_logit_softcapping=None, attention_bias=False,
                   cache_implementation="hybrid", pad_token_id=0, tie_word_embeddings=True),
    # Qwen2 with its window on: the layers from max_window_layers on slide (layer 1 of 2).
    "qwen2_window": dict(_LLAMA_LIKE, model_type="qwen2", architectures=["Qwen2ForCausalLM"],
                         intermediate_size=48, max_position_embeddings=64, rms_norm_eps=1e-6,
                         rope_theta=1000000.0, use_sliding_window=True, sliding_window=6, max_window_layers=1,
                         tie_word_embeddings=False),
    # SmolLM3: Llama with every no_rope_layer_interval-th layer without RoPE (no_rope_layers: 1
    # rotates, 0 does not; here layer 1 of 2), its head tied by default (the file has no
    # tie_word_embeddings), the unused fields as published.
    "smollm3": dict(_LLAMA_LIKE, model_type="smollm3", architectures=["SmolLM3ForCausalLM"],
                    max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=5000000.0, rope_scaling=None,
                    attention_bias=False, mlp_bias=False, layer_types=["full_attention", "full_attention"],
                    max_window_layers=28, no_rope_layer_interval=4, no_rope_layers=[1, 0], pretraining_tp=2,
                    sliding_window=None, use_sliding_window=False),
    # Gemma 3 with a layer pattern of its own, as transformers 5's layer_types gives one: the
    # first layer global, the other two windowed (no sliding_window_pattern describes it).
    "gemma3_types": dict(_LLAMA_LIKE, model_type="gemma3_text", architectures=["Gemma3ForCausalLM"],
                         num_hidden_layers=3, intermediate_size=64, head_dim=16, max_position_embeddings=64,
                         rms_norm_eps=1e-6, rope_theta=1000000.0, rope_local_base_freq=10000.0,
                         rope_scaling={"factor": 8.0, "rope_type": "linear"}, hidden_activation="gelu_pytorch_tanh",
                         query_pre_attn_scalar=24, sliding_window=6,
                         layer_types=["full_attention", "sliding_attention", "sliding_attention"],
                         attn_logit_softcapping=None, final_logit_softcapping=None, attention_bias=False,
                         pad_token_id=0, tie_word_embeddings=True, transformers_version="5.0.0"),
    # Falcon 7B's layout: multi-query attention (one kv head), both branches reading one
    # LayerNorm, no linear biases, tied embeddings.
    "falcon": {"model_type": "falcon", "architectures": ["FalconForCausalLM"], "hidden_size": 32,
               "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 64, "multi_query": True,
               "new_decoder_architecture": False, "parallel_attn": True, "bias": False, "alibi": False,
               "layer_norm_epsilon": 1e-5, "hidden_dropout": 0.0, "attention_dropout": 0.0,
               "rope_theta": 10000.0, "max_position_embeddings": 64, "bos_token_id": 11,
               "eos_token_id": 11, "initializer_range": 0.02, "use_cache": True,
               "torch_dtype": "bfloat16", "transformers_version": "4.33.0"},
    # Falcon 40B's first config (model_type RefinedWeb): the new decoder architecture, kv groups
    # (2 of 4 heads) in query_key_value, a LayerNorm per branch.
    "falcon_rw": {"model_type": "RefinedWeb", "architectures": ["RWForCausalLM"], "hidden_size": 32,
                  "n_layer": 2, "n_head": 4, "n_head_kv": 2, "vocab_size": 64, "alibi": False,
                  "apply_residual_connection_post_layernorm": False, "bias": False, "parallel_attn": True,
                  "layer_norm_epsilon": 1e-5, "hidden_dropout": 0.0, "attention_dropout": 0.0,
                  "bos_token_id": 11, "eos_token_id": 11, "initializer_range": 0.02, "use_cache": True,
                  "torch_dtype": "bfloat16", "transformers_version": "4.27.4"},
}
# Features no family above has by default, in configs of the same model types: GPT-2 without
# the 1/sqrt(d) scale, with the inverse-layer scale and exact GELU; Llama with every bias.
FAMILIES["gpt2_flags"] = dict(FAMILIES["gpt2"], activation_function="gelu", scale_attn_weights=False,
                              scale_attn_by_inverse_layer_idx=True)
FAMILIES["llama_bias"] = dict(FAMILIES["llama"], attention_bias=True, mlp_bias=True)
# Mixtures of experts, dropless as Hugging Face routes: Mixtral (4 experts, top-2, renormalised),
# Qwen3-MoE (6 experts of their own width, top-3 not renormalised, per-head QK-norm, layer 1 dense
# through mlp_only_layers).
FAMILIES["mixtral"] = dict(_LLAMA_LIKE, model_type="mixtral", architectures=["MixtralForCausalLM"],
                           intermediate_size=24, max_position_embeddings=64, rms_norm_eps=1e-5,
                           rope_theta=1000000.0, sliding_window=None, num_local_experts=4,
                           num_experts_per_tok=2, output_router_logits=False, router_aux_loss_coef=0.02,
                           tie_word_embeddings=False)
FAMILIES["qwen3_moe"] = dict(_LLAMA_LIKE, model_type="qwen3_moe", architectures=["Qwen3MoeForCausalLM"],
                             head_dim=8, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
                             attention_bias=False, decoder_sparse_step=1, mlp_only_layers=[1],
                             moe_intermediate_size=20, norm_topk_prob=False, num_experts=6,
                             num_experts_per_tok=3, output_router_logits=False, router_aux_loss_coef=0.001,
                             use_sliding_window=False, sliding_window=None, max_window_layers=2,
                             tie_word_embeddings=False)
# Qwen2-MoE (Qwen1.5-MoE): q/k/v biases, 5 experts, top-2 not renormalised, one shared expert
# gated by sigmoid(x · shared_expert_gate).
FAMILIES["qwen2_moe"] = dict(_LLAMA_LIKE, model_type="qwen2_moe", architectures=["Qwen2MoeForCausalLM"],
                             max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
                             decoder_sparse_step=1, moe_intermediate_size=16, norm_topk_prob=False,
                             num_experts=5, num_experts_per_tok=2, shared_expert_intermediate_size=28,
                             output_router_logits=False, router_aux_loss_coef=0.001, use_sliding_window=False,
                             sliding_window=32768, max_window_layers=2, tie_word_embeddings=False)

# The step's shape for every family (the run's --seq/--batch overrides).
SEQ, BATCH = 16, 2
# DeepSeek's published fields (DeepSeek-V3 and DeepSeek-V2's config.json, less auto_map and V3's fp8
# quantization_config), shrunk: multi-head latent attention with v_head_dim (6) != nope + rope (12),
# layer 0 dense and layer 1 a mixture (first_k_dense_replace 1) of 8 experts in 4 groups, 2 groups
# kept, top-2 (V2 top-3), one shared expert. YaRN as published (theta 10000, factor 40 = 163840 / 4096, betas
# 32 / 1) over the 4 rope dims keeps frequency 0 and blends frequency 1 half-way; mscale 0.9 against
# mscale_all_dim 0.7 makes cos/sin's factor 1.059 and V3's softmax mscale^2 1.583.
_DEEPSEEK_YARN = {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.9, "mscale_all_dim": 0.7,
                  "original_max_position_embeddings": 4096, "type": "yarn"}
_DEEPSEEK = {"attention_bias": False, "attention_dropout": 0.0, "first_k_dense_replace": 1, "hidden_act": "silu",
             "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 40, "kv_lora_rank": 16,
             "max_position_embeddings": 163840, "moe_intermediate_size": 12, "moe_layer_freq": 1, "n_group": 4,
             "n_routed_experts": 8, "n_shared_experts": 1, "num_attention_heads": 4, "num_experts_per_tok": 2,
             "num_hidden_layers": 2, "num_key_value_heads": 4, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
             "rms_norm_eps": 1e-06, "rope_scaling": _DEEPSEEK_YARN, "rope_theta": 10000, "tie_word_embeddings": False,
             "topk_group": 2, "torch_dtype": "bfloat16", "use_cache": True, "v_head_dim": 6, "vocab_size": 64}
# V3: a compressed query (q_lora_rank), sigmoid scores with the correction bias choosing, groups
# scored by their two best, renormalised top-k times routed_scaling_factor.
FAMILIES["deepseek_v3"] = dict(_DEEPSEEK, model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"],
                               bos_token_id=0, eos_token_id=1, ep_size=1, norm_topk_prob=True,
                               num_nextn_predict_layers=1, q_lora_rank=12, routed_scaling_factor=2.5,
                               scoring_func="sigmoid", topk_method="noaux_tc", transformers_version="4.33.1")
# V2: a full q_proj (q_lora_rank null), softmax scores, groups scored by their best, the top-k
# weights not renormalised but times routed_scaling_factor. Top-3 of the 2 groups kept: with
# groups scored by their best, the groups only matter where top-k > topk_group (published: 6 > 3).
FAMILIES["deepseek_v2"] = dict(_DEEPSEEK, model_type="deepseek_v2", architectures=["DeepseekV2ForCausalLM"],
                               aux_loss_alpha=0.001, bos_token_id=100, eos_token_id=101, ep_size=1,
                               norm_topk_prob=False, num_experts_per_tok=3, pretraining_tp=1, q_lora_rank=None,
                               routed_scaling_factor=1.7, scoring_func="softmax", seq_aux=True,
                               topk_method="group_limited_greedy", transformers_version="4.39.3")
# gpt-oss (openai/gpt-oss-20b's config.json, less its mxfp4 quantization_config), shrunk: head_dim 8
# against hidden / heads = 4, 2 kv heads, q/k/v/o biases, a sink per head, layer 0 windowed (6 < seq)
# and layer 1 full, 4 experts of 12, top-2, a router bias. YaRN as published (theta 150000, factor
# 32 = 32768 / 1024, betas 32 / 1, truncate false) with the original length scaled to 1024: over
# head_dim 8 the correction range is [0.55, 1.71], not whole dims, so frequency 1 is blended 39%
# (truncated: [0, 2], 50%). swiglu_limit 1 (7 as published) clamps the experts' gate and up
# projections of these weights (about N(0, 0.8²)); output_router_logits off as published.
FAMILIES["gpt_oss"] = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0, "eos_token_id": 63,
    "experts_per_token": 2, "head_dim": 8, "hidden_act": "silu", "hidden_size": 16, "initial_context_length": 1024,
    "initializer_range": 0.02, "intermediate_size": 12, "layer_types": ["sliding_attention", "full_attention"],
    "max_position_embeddings": 32768, "model_type": "gpt_oss", "num_attention_heads": 4, "num_experts_per_tok": 2,
    "num_hidden_layers": 2, "num_key_value_heads": 2, "num_local_experts": 4, "output_router_logits": False,
    "pad_token_id": 62, "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 1024,
                     "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 6, "swiglu_limit": 1.0,
    "tie_word_embeddings": False, "transformers_version": "4.55.0.dev0", "use_cache": True, "vocab_size": 64}
# The load-balancing loss under output_router_logits, at the published coefficients (Mixtral's
# 0.02, Qwen3-MoE's 0.001 with its dense layer left out of the count, gpt-oss's 0.9).
FAMILIES["mixtral_aux"] = dict(FAMILIES["mixtral"], output_router_logits=True)
FAMILIES["qwen3_moe_aux"] = dict(FAMILIES["qwen3_moe"], output_router_logits=True)
FAMILIES["gpt_oss_aux"] = dict(FAMILIES["gpt_oss"], output_router_logits=True)
# Llama 4's text model (Llama-4-Scout-17B-16E's text_config, as Llama4ForCausalLM reads a
# llama4_text config.json), shrunk: 4 layers, head_dim 16 against hidden / heads = 8, 2 kv heads.
# Layers 1 and 3 a mixture (interleave_moe_layer_step 2, as Maverick) of 4 experts of width 16,
# top-1, plus the shared expert; layers 0 and 2 a dense MLP of width intermediate_size_mlp 40.
# no_rope_layers [1, 1, 1, 0] (the default every 4th, which 4.51 fixed whatever the config): layer
# 3 is NoPE, full attention, its queries temperature-tuned; layers 0-2 rotate (adjacent pairs),
# L2-norm q and k and attend in chunks of 6 (not dividing 16: chunks 0-5, 6-11, 12-15).
# floor_scale 4 and attn_scale 0.5 (8192 and 0.1 published) make the temperature 1, 1.35, 1.55,
# 1.69, 1.80 over positions 0-2, 3-6, 7-10, 11-14, 15. Scout's llama3 scaling (factor 8, low and
# high frequency factors 1 and 4) with the original length 64 (8192 published): over head_dim 16
# at theta 500000 frequency 0 (wavelength 6.3) is kept, 1 (32.5) smoothed, 2-7 (167 up) divided
# by 8. No load-balancing loss whatever output_router_logits says (Llama4ForCausalLM adds none).
FAMILIES["llama4_text"] = {
    "architectures": ["Llama4ForCausalLM"], "attention_bias": False, "attention_chunk_size": 6,
    "attention_dropout": 0.0, "attn_scale": 0.5, "attn_temperature_tuning": True, "bos_token_id": 1,
    "eos_token_id": 2, "floor_scale": 4, "head_dim": 16, "hidden_act": "silu", "hidden_size": 32,
    "initializer_range": 0.02, "interleave_moe_layer_step": 2, "intermediate_size": 16,
    "intermediate_size_mlp": 40, "max_position_embeddings": 1024, "model_type": "llama4_text",
    "no_rope_layers": [1, 1, 1, 0], "num_attention_heads": 4, "num_experts_per_tok": 1, "num_hidden_layers": 4,
    "num_key_value_heads": 2, "num_local_experts": 4, "output_router_logits": False, "pad_token_id": 0,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 64, "rope_type": "llama3"},
    "rope_theta": 500000.0, "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": True, "use_qk_norm": True, "vocab_size": 64}
# Two experts per token: each chosen expert's input times its own sigmoid score (no renormalisation).
FAMILIES["llama4_text_top2"] = dict(FAMILIES["llama4_text"], num_experts_per_tok=2)
