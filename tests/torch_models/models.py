"""Small GPT-2-style and Llama-style PyTorch models for the recorder's tests and benchmark:
plain PyTorch, written from the papers' block structure (pre-norm attention and MLP with
residuals), small enough for a CPU step in well under a second."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_attention(q, k, v):
    """softmax(q k^T / sqrt(d) + causal mask) v over (B, heads, S, d)."""
    s = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v


class Gpt2Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.n_head = heads
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.c_attn(x).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.n_head, h // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = causal_attention(q, k, v).transpose(1, 2).reshape(b, s, h)
        return self.c_proj(y)


class Gpt2Mlp(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.c_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Gpt2Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = Gpt2Attention(hidden, heads)
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp = Gpt2Mlp(hidden)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2(nn.Module):
    def __init__(self, vocab=128, hidden=48, heads=4, layers=4, positions=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(positions, hidden)
        self.h = nn.ModuleList(Gpt2Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


class RmsNorm(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, theta=10000.0):
    """Rotary position embedding over (B, heads, S, d), rotating the two halves of d."""
    s, d = x.shape[-2], x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d)
    ang = torch.arange(s, dtype=torch.float32, device=x.device)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class LlamaAttention(nn.Module):
    def __init__(self, hidden, heads, kv_heads):
        super().__init__()
        self.num_heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        b, s, h = x.shape
        q = self.q_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        rep = self.num_heads // self.kv_heads
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        y = causal_attention(rope(q), rope(k), v).transpose(1, 2).reshape(b, s, h)
        return self.o_proj(y)


class LlamaMlp(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.input_layernorm = RmsNorm(hidden)
        self.self_attn = LlamaAttention(hidden, heads, kv_heads)
        self.post_attention_layernorm = RmsNorm(hidden)
        self.mlp = LlamaMlp(hidden, ffn)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, vocab=128, hidden=64, heads=4, kv_heads=2, ffn=128, layers=3):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaBlock(hidden, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RmsNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, idx, targets):
        x = self.embed_tokens(idx)
        for blk in self.layers:
            x = blk(x)
        return F.cross_entropy(self.lm_head(self.norm(x)).flatten(0, 1), targets.flatten())


def batch(vocab, batch=2, seq=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, vocab, (batch, seq + 1), generator=g)
    return idx[:, :-1], idx[:, 1:]


class CrossBlock(nn.Module):
    """A decoder block as T5's and BART's are called: the encoder's states and the mask as
    keyword arguments, (hidden_states, attention weights) returned."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.n_head = heads
        self.ln_1, self.ln_2, self.ln_3 = nn.LayerNorm(hidden), nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn = Gpt2Attention(hidden, heads)
        self.q, self.kv, self.o = nn.Linear(hidden, hidden), nn.Linear(hidden, 2 * hidden), nn.Linear(hidden, hidden)
        self.mlp = Gpt2Mlp(hidden)

    def forward(self, x, encoder_hidden_states=None, attention_mask=None):
        x = x + self.attn(self.ln_1(x))
        k, v = self.kv(encoder_hidden_states).chunk(2, dim=-1)
        scores = self.q(self.ln_2(x)) @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])
        w = (scores + attention_mask).softmax(-1)
        x = x + self.o(w @ v)
        return x + self.mlp(self.ln_3(x)), w


class CrossDecoder(nn.Module):
    """An encoder (one linear over the embedded tokens) and decoder blocks that take its states
    and a mask as keyword arguments and return tuples, as Hugging Face's encoder-decoders do."""

    def __init__(self, vocab=128, hidden=48, heads=4, layers=3):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.encoder = nn.Linear(hidden, hidden)
        self.h = nn.ModuleList(CrossBlock(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, idx, targets):
        x = self.wte(idx)
        enc = torch.tanh(self.encoder(x.flip(1)))
        mask = torch.zeros(idx.shape[1], idx.shape[1], device=idx.device)
        mask[:, -1] = float("-inf")  # the last encoder position is padding
        for blk in self.h:
            x = blk(x, encoder_hidden_states=enc, attention_mask=mask)[0]
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def by_name(kind, vocab=256, hidden=64, layers=4, positions=64):
    """One of the test models by name: gpt2 (blocks chained), llama, or cross (blocks that take
    keyword tensors from a second stack), 4 heads."""
    if kind == "gpt2":
        return Gpt2(vocab=vocab, hidden=hidden, heads=4, layers=layers, positions=positions)
    if kind == "llama":
        return Llama(vocab=vocab, hidden=hidden, heads=4, kv_heads=2, ffn=2 * hidden, layers=layers)
    if kind == "cross":
        return CrossDecoder(vocab=vocab, hidden=hidden, heads=4, layers=layers)
    raise ValueError("no test model %r (gpt2, llama, cross)" % kind)
