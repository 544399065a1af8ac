"""Transformer-style models for the corpus, written after public architectures.

Small dims and few layers, so that they convert and run in well under a second
each; the shapes of the computation (masks, caches, pooling, position biases,
modulation) follow the published models, not cannprof's own test models.
Every builder returns (module, inputs, input_names, source).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _attend(q, k, v, bias=None):
    """q, k, v: [B, H, T, D]; bias broadcast onto the [B, H, Tq, Tk] scores."""
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def _heads(x, n):
    b, t, c = x.shape
    return x.reshape(b, t, n, c // n).transpose(1, 2)


def _merge(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


# ---- BERT: post-LN encoder, token types, padding mask, tanh pooler --------------
class BertLayer(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d, eps=1e-12)
        self.ff1 = nn.Linear(d, ff)
        self.ff2 = nn.Linear(ff, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-12)

    def forward(self, x, bias):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        a = _merge(_attend(_heads(q, self.heads), _heads(k, self.heads), _heads(v, self.heads), bias))
        x = self.ln1(x + self.out(a))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class Bert(nn.Module):
    def __init__(self, vocab=512, d=64, heads=4, ff=256, layers=2, max_pos=64):
        super().__init__()
        self.word = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_pos, d)
        self.token_type = nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(d, heads, ff) for _ in range(layers))
        self.pool = nn.Linear(d, d)

    def forward(self, input_ids, attention_mask, token_type_ids):
        t = input_ids.shape[1]
        pos = torch.arange(t, device=input_ids.device).unsqueeze(0)
        x = self.ln(self.word(input_ids) + self.pos(pos) + self.token_type(token_type_ids))
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pool(x[:, 0]))


def bert():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 512, (2, 16), generator=g)
    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[1, 11:] = 0  # the second sequence is padded
    types = torch.zeros(2, 16, dtype=torch.int64)
    types[:, 8:] = 1
    return (Bert(), (ids, mask, types), ["input_ids", "attention_mask", "token_type_ids"],
            "BERT (Devlin et al. 2018): post-LN encoder with padding mask and pooler")


# ---- GPT-2: pre-LN decoder, causal mask, key/value cache in and out --------------
class Gpt2Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_proj = nn.Linear(4 * d, d)

    def forward(self, x, past_k, past_v):
        q, k, v = self.attn(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = _heads(q, self.heads), _heads(k, self.heads), _heads(v, self.heads)
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        tq, tk = q.shape[2], k.shape[2]
        # The new tokens see every cached one and the new ones up to themselves.
        causal = torch.tril(torch.ones(tq, tk, dtype=torch.bool), diagonal=tk - tq)
        bias = torch.where(causal, torch.zeros(()), torch.full((), -1e9))
        x = x + self.proj(_merge(_attend(q, k, v, bias)))
        x = x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x, k, v


class Gpt2(nn.Module):
    def __init__(self, vocab=512, d=64, heads=4, layers=2, max_pos=64):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_pos, d)
        self.blocks = nn.ModuleList(Gpt2Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, input_ids, past_k0, past_v0, past_k1, past_v1):
        past = past_k0.shape[2]
        t = input_ids.shape[1]
        pos = torch.arange(past, past + t).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(pos)
        x, k0, v0 = self.blocks[0](x, past_k0, past_v0)
        x, k1, v1 = self.blocks[1](x, past_k1, past_v1)
        logits = torch.matmul(self.ln_f(x), self.wte.weight.t())  # tied embedding
        return logits, k0, v0, k1, v1


def gpt2():
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 512, (1, 4), generator=g)
    past = [torch.randn(1, 4, 6, 16, generator=g) for _ in range(4)]
    return (Gpt2(), (ids, *past),
            ["input_ids", "past_key_0", "past_value_0", "past_key_1", "past_value_1"],
            "GPT-2 (Radford et al. 2019): pre-LN decoder, causal mask, KV cache")


# ---- CLIP text encoder: causal mask, quick-GELU, ArgMax (EOT) pooling ------------
class ClipLayer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x, bias):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        x = x + self.out(_merge(_attend(_heads(q, self.heads), _heads(k, self.heads),
                                        _heads(v, self.heads), bias)))
        h = self.fc1(self.ln2(x))
        return x + self.fc2(h * torch.sigmoid(1.702 * h))


class ClipText(nn.Module):
    def __init__(self, vocab=512, d=64, heads=4, layers=2, ctx=16, proj=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(ctx, d) * 0.02)
        self.layers = nn.ModuleList(ClipLayer(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.proj = nn.Parameter(torch.randn(d, proj) * d ** -0.5)
        mask = torch.full((ctx, ctx), float("-inf")).triu(1)
        self.register_buffer("mask", mask)

    def forward(self, input_ids):
        x = self.tok(input_ids) + self.pos
        for layer in self.layers:
            x = layer(x, self.mask)
        x = self.ln_f(x)
        # The end-of-text token has the largest id: pool at its position.
        eot = x[torch.arange(x.shape[0]), input_ids.argmax(dim=-1)]
        return x, eot @ self.proj


def clip_text():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, 500, (2, 16), generator=g)
    ids[0, 9] = 511
    ids[1, 15] = 511
    return (ClipText(), (ids,), ["input_ids"],
            "CLIP text encoder (Radford et al. 2021): causal mask, ArgMax EOT pooling")


# ---- T5 encoder: RMS LayerNorm, relative position buckets, ReLU FF ---------------
class T5Norm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def t5_buckets(rel, num_buckets=32, max_distance=128):
    """Bidirectional relative position buckets, as in the T5 paper's code."""
    num_buckets //= 2
    ret = (rel > 0).to(torch.long) * num_buckets
    n = torch.abs(rel)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    large = max_exact + (torch.log(n.float() / max_exact + 1e-6) /
                         math.log(max_distance / max_exact) * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return ret + torch.where(is_small, n, large)


class T5Layer(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.ln1 = T5Norm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.ln2 = T5Norm(d)
        self.wi = nn.Linear(d, ff, bias=False)
        self.wo = nn.Linear(ff, d, bias=False)

    def forward(self, x, bias):
        h = self.ln1(x)
        q, k, v = (_heads(f(h), self.heads) for f in (self.q, self.k, self.v))
        # T5 does not scale the scores.
        scores = torch.matmul(q, k.transpose(-1, -2)) + bias
        x = x + self.o(_merge(torch.matmul(torch.softmax(scores, dim=-1), v)))
        return x + self.wo(F.relu(self.wi(self.ln2(x))))


class T5Encoder(nn.Module):
    def __init__(self, vocab=512, d=64, heads=4, ff=128, layers=2, buckets=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.rel = nn.Embedding(buckets, heads)
        self.layers = nn.ModuleList(T5Layer(d, heads, ff) for _ in range(layers))
        self.ln_f = T5Norm(d)

    def forward(self, input_ids, attention_mask):
        t = input_ids.shape[1]
        pos = torch.arange(t)
        rel = pos[None, :] - pos[:, None]
        bias = self.rel(t5_buckets(rel)).permute(2, 0, 1).unsqueeze(0)
        bias = bias + (1.0 - attention_mask[:, None, None, :].float()) * -1e9
        x = self.embed(input_ids)
        for layer in self.layers:
            x = layer(x, bias)
        return self.ln_f(x)


def t5():
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, 512, (2, 24), generator=g)
    mask = torch.ones(2, 24, dtype=torch.int64)
    mask[0, 20:] = 0
    return (T5Encoder(), (ids, mask), ["input_ids", "attention_mask"],
            "T5 encoder (Raffel et al. 2019): RMS norm, relative position bias buckets")


# ---- Whisper encoder: conv front end on log-mel frames, sinusoids, pre-LN --------
def sinusoids(length, channels, max_timescale=10000):
    inc = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-inc * torch.arange(channels // 2))
    t = torch.arange(length)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class WhisperLayer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.ln1(x)
        q, k, v = (_heads(f(h), self.heads) for f in (self.q, self.k, self.v))
        x = x + self.o(_merge(_attend(q, k, v)))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class WhisperEncoder(nn.Module):
    def __init__(self, mels=16, frames=64, d=64, heads=4, layers=2):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, d, 3, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.register_buffer("pos", sinusoids(frames // 2, d))
        self.layers = nn.ModuleList(WhisperLayer(d, heads) for _ in range(layers))
        self.ln_post = nn.LayerNorm(d)

    def forward(self, mel):
        x = F.gelu(self.conv1(mel))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        x = x + self.pos
        for layer in self.layers:
            x = layer(x)
        return self.ln_post(x)


def whisper():
    g = torch.Generator().manual_seed(5)
    mel = torch.randn(1, 16, 64, generator=g)
    return (WhisperEncoder(), (mel,), ["mel"],
            "Whisper encoder (Radford et al. 2022): conv front end, sinusoidal positions")


# ---- DiT / MMDiT: patchify, sinusoidal timestep, adaLN-zero, RMSNorm q/k ---------
class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def _plain_ln(d):
    """LayerNorm before modulation. DiT has no affine here, but torch 1.13
    writes an invalid LayerNormalization (no scale) at opset 17 without one,
    so it gets a unit affine: the same function."""
    return nn.LayerNorm(d, eps=1e-6)


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class JointBlock(nn.Module):
    """One MMDiT block: image and text streams, each with its own adaLN and
    weights, attend jointly over the concatenated tokens."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.streams = nn.ModuleList()
        for _ in range(2):
            s = nn.Module()
            s.ada = nn.Linear(d, 6 * d)
            s.ln1 = _plain_ln(d)
            s.qkv = nn.Linear(d, 3 * d)
            s.q_norm = RMSNorm(d // heads)
            s.k_norm = RMSNorm(d // heads)
            s.proj = nn.Linear(d, d)
            s.ln2 = _plain_ln(d)
            s.fc1 = nn.Linear(d, 4 * d)
            s.fc2 = nn.Linear(4 * d, d)
            self.streams.append(s)

    def forward(self, x, ctx, c):
        mods, qs, ks, vs = [], [], [], []
        for s, h in zip(self.streams, (x, ctx)):
            m = s.ada(F.silu(c)).chunk(6, dim=-1)
            mods.append(m)
            q, k, v = s.qkv(modulate(s.ln1(h), m[0], m[1])).chunk(3, dim=-1)
            qs.append(s.q_norm(_heads(q, self.heads)))
            ks.append(s.k_norm(_heads(k, self.heads)))
            vs.append(_heads(v, self.heads))
        n = x.shape[1]
        a = _merge(_attend(torch.cat(qs, 2), torch.cat(ks, 2), torch.cat(vs, 2)))
        outs = []
        for s, h, m, part in zip(self.streams, (x, ctx), mods, (a[:, :n], a[:, n:])):
            h = h + m[2].unsqueeze(1) * s.proj(part)
            ff = s.fc2(F.gelu(s.fc1(modulate(s.ln2(h), m[3], m[4])), approximate="tanh"))
            outs.append(h + m[5].unsqueeze(1) * ff)
        return outs[0], outs[1]


class MMDiT(nn.Module):
    def __init__(self, ch=4, size=16, patch=2, d=64, heads=4, depth=2, ctx_dim=48, pooled=32):
        super().__init__()
        self.patch, self.ch, self.size = patch, ch, size
        self.embed = nn.Conv2d(ch, d, patch, stride=patch)
        self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2, d) * 0.02)
        self.t_dim = 64
        self.t_mlp = nn.Sequential(nn.Linear(self.t_dim, d), nn.SiLU(), nn.Linear(d, d))
        self.y_mlp = nn.Sequential(nn.Linear(pooled, d), nn.SiLU(), nn.Linear(d, d))
        self.ctx = nn.Linear(ctx_dim, d)
        self.blocks = nn.ModuleList(JointBlock(d, heads) for _ in range(depth))
        self.final_ada = nn.Linear(d, 2 * d)
        self.final_ln = _plain_ln(d)
        self.final = nn.Linear(d, patch * patch * ch)

    def forward(self, latent, timestep, context, pooled):
        x = self.embed(latent).flatten(2).transpose(1, 2) + self.pos
        c = self.t_mlp(timestep_embedding(timestep, self.t_dim)) + self.y_mlp(pooled)
        ctx = self.ctx(context)
        for blk in self.blocks:
            x, ctx = blk(x, ctx, c)
        shift, scale = self.final_ada(F.silu(c)).chunk(2, dim=-1)
        x = self.final(modulate(self.final_ln(x), shift, scale))
        b, g, p = x.shape[0], self.size // self.patch, self.patch
        x = x.reshape(b, g, g, p, p, self.ch).permute(0, 5, 1, 3, 2, 4)
        return x.reshape(b, self.ch, self.size, self.size)


def mmdit():
    g = torch.Generator().manual_seed(6)
    latent = torch.randn(1, 4, 16, 16, generator=g)
    t = torch.tensor([500.0])
    ctx = torch.randn(1, 8, 48, generator=g)
    pooled = torch.randn(1, 32, generator=g)
    return (MMDiT(), (latent, t, ctx, pooled), ["latent", "timestep", "context", "pooled"],
            "MMDiT / SD3 (Esser et al. 2024), DiT (Peebles & Xie 2022): adaLN, RMSNorm q/k, "
            "sinusoidal timestep")


BUILDERS = {
    "bert_encoder": bert,
    "gpt2_decoder_kv": gpt2,
    "clip_text": clip_text,
    "t5_encoder": t5,
    "whisper_encoder": whisper,
    "mmdit_denoiser": mmdit,
}
