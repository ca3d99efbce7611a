"""An EAGLE-3 draft head in plain torch, written to the conventions llama.cpp b11434 serves (torch env only).

Run only by the torch environment's Python (`spectui setup --vllm` makes it), as a sibling of
eagle3_train.py; nothing in spectui imports this module, so torch never enters the TUI's venv.

Conventions, each where llama.cpp (the pinned b11434 source) or the trainers fix it:
- aux layers default [2, n//2, n-3] (llama.cpp conversion/llama.py:77-82; speculators models/utils.py).
- "layer L" is the INPUT of decoder layer L: llama.cpp stores `res->t_layer_inp[il] = inpL` before the
  layer runs (src/models/llama.cpp:127), so features come from forward PRE-hooks on model.model.layers[L]
  (= transformers' output_hidden_states[L]).
- the fused features go through fc (3h → h) (src/models/eagle3.cpp, encoder graph); the decoder concatenates
  [input_layernorm(embedding), hidden_norm(g)] (eagle3.cpp "concat_embd"), the residual is the raw g
  (norm_before_residual false), and the PRE-norm output is what the next drafting step gets as g
  (eagle3.cpp:286-288 `res->t_h_nextn = cur` before output_norm).
- pairing: at position P the head takes (token[P+1], g[P]) with RoPE at P and predicts token[P+2]
  (common/speculative.cpp:480-512, :809); drafting step i runs at P+i with its own previous pre-norm output
  (speculative.cpp:856-880).
- test-time training (TTT): step k's query at row P attends to step-0 keys at rows <= P and to the keys of
  steps 1..k at row P only (speculators src/speculators/models/eagle3/attention.py, the diagonal mask):
  what llama.cpp's draft KV cache holds while it drafts.
- trimmed vocabulary: d2t[i] = target_id - i (offsets, SpecForge scripts/train_eagle3.py / data
  preprocessing); llama.cpp's converter adds arange and checks range and duplicates
  (conversion/llama.py:338-349). With the full vocabulary the head has no lm_head of its own and llama.cpp
  uses the target's (eagle3.cpp "inherit the target model's lm_head").
"""

from __future__ import annotations

import math

import torch
from torch import nn


def default_aux_layers(n_layers: int) -> list[int]:
    """llama.cpp conversion/llama.py:81 `[2, target_num_layers // 2, target_num_layers - 3]`."""
    return [2, n_layers // 2, n_layers - 3]


def capture_layer_inputs(model, layers: list[int], input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the target once; return (the inputs of decoder layers `layers` concatenated [T, 3h], logits [T, V]).
    Pre-hooks see the hidden state as the layer receives it (llama.cpp's t_layer_inp)."""
    got: dict[int, torch.Tensor] = {}
    handles = []
    for L in layers:

        def hook(_mod, args, kwargs, L=L):
            h = args[0] if args else kwargs["hidden_states"]
            got[L] = h.detach()

        handles.append(model.model.layers[L].register_forward_pre_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            out = model(input_ids=input_ids[None, :], use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return torch.cat([got[L][0] for L in layers], dim=-1), out.logits[0]


def pairs(n_tokens: int, step: int = 0) -> list[tuple[int, int, int]]:
    """(feature row P, input token index P+1+step, label index P+2+step) for every row whose label exists:
    speculative.cpp's (token[P+1], g[P]) -> token[P+2], shifted by one more for each TTT step."""
    return [(p, p + 1 + step, p + 2 + step) for p in range(n_tokens - 2 - step)]


def trimmed_vocab(counts: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The `size` most frequent target ids (ties and unseen ids by id: lower BPE ids are earlier merges),
    as (d2t offsets, t2d bool mask, draft→target ids sorted ascending)."""
    V = counts.numel()
    order = sorted(range(V), key=lambda i: (-int(counts[i]), i))[:size]
    ids = torch.tensor(sorted(order), dtype=torch.long)
    d2t = ids - torch.arange(ids.numel(), dtype=torch.long)
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[ids] = True
    return d2t, t2d, ids


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """HF rotate_half RoPE ([T, heads, d]); llama.cpp's converter permutes q/k so GGML's rope matches it."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = pos.float()[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Attention(nn.Module):
    def __init__(self, h: int, heads: int, kv_heads: int, head_dim: int, theta: float):
        super().__init__()
        self.q_proj = nn.Linear(2 * h, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(2 * h, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(2 * h, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, h, bias=False)
        self.heads, self.kv_heads, self.head_dim, self.theta = heads, kv_heads, head_dim, theta

    def forward(self, x: torch.Tensor, pos: torch.Tensor, cache: list) -> torch.Tensor:
        """x [T, 2h] at positions pos; cache holds (k, v) of earlier TTT steps (step 0 first)."""
        T, r = x.shape[0], self.heads // self.kv_heads
        q = rope(self.q_proj(x).view(T, self.heads, self.head_dim), pos, self.theta)
        k = rope(self.k_proj(x).view(T, self.kv_heads, self.head_dim), pos, self.theta)
        v = self.v_proj(x).view(T, self.kv_heads, self.head_dim)
        # GQA: query head j uses kv head j // r (HF repeat_kv; ggml mul_mat broadcasts the same way)
        k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
        cache.append((k, v))
        k0, v0 = cache[0]
        scale = 1.0 / math.sqrt(self.head_dim)
        s0 = torch.einsum("qhd,khd->hqk", q, k0) * scale
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        s0 = s0.masked_fill(~causal, float("-inf"))
        diag = [torch.einsum("qhd,qhd->hq", q, kj)[..., None] * scale for kj, _ in cache[1:]]
        w = torch.softmax(torch.cat([s0, *diag], dim=-1), dim=-1)
        out = torch.einsum("hqk,khd->qhd", w[..., :T], v0)
        for j, (_, vj) in enumerate(cache[1:]):
            out = out + w[..., T + j].transpose(0, 1)[..., None] * vj
        return self.o_proj(out.reshape(T, -1))


class MLP(nn.Module):
    def __init__(self, h: int, inter: int):
        super().__init__()
        self.gate_proj = nn.Linear(h, inter, bias=False)
        self.up_proj = nn.Linear(h, inter, bias=False)
        self.down_proj = nn.Linear(inter, h, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class MidLayer(nn.Module):
    def __init__(self, h, inter, heads, kv_heads, head_dim, eps, theta):
        super().__init__()
        self.input_layernorm = RMSNorm(h, eps)
        self.hidden_norm = RMSNorm(h, eps)
        self.self_attn = Attention(h, heads, kv_heads, head_dim, theta)
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.mlp = MLP(h, inter)

    def forward(self, emb, g, pos, cache):
        x = torch.cat([self.input_layernorm(emb), self.hidden_norm(g)], dim=-1)  # eagle3.cpp concat order
        h = self.self_attn(x, pos, cache) + g  # residual: the raw g (norm_before_residual = false)
        return h + self.mlp(self.post_attention_layernorm(h))  # the pre-norm output


class Eagle3Head(nn.Module):
    """fc + one decoder layer + norm (+ lm_head on a trimmed vocabulary). Embeddings and, at full vocabulary,
    the LM head are the target's, frozen and not saved (llama.cpp takes them from the target)."""

    def __init__(self, cfg: dict, embed: torch.Tensor, lm_head: torch.Tensor, draft_ids: torch.Tensor | None):
        super().__init__()
        h = cfg["hidden_size"]
        self.fc = nn.Linear(3 * cfg["target_hidden_size"], h, bias=False)
        self.midlayer = MidLayer(
            h,
            cfg["intermediate_size"],
            cfg["num_attention_heads"],
            cfg["num_key_value_heads"],
            cfg["head_dim"],
            cfg["rms_norm_eps"],
            cfg["rope_theta"],
        )
        self.norm = RMSNorm(h, cfg["rms_norm_eps"])
        self.register_buffer("embed", embed, persistent=False)
        self.trimmed = draft_ids is not None
        if draft_ids is not None:
            self.lm_head = nn.Linear(h, draft_ids.numel(), bias=False)
            with torch.no_grad():
                self.lm_head.weight.copy_(lm_head[draft_ids])
        else:
            self.register_buffer("frozen_lm_head", lm_head, persistent=False)

    def logits(self, prenorm: torch.Tensor) -> torch.Tensor:
        x = self.norm(prenorm)
        return self.lm_head(x) if self.trimmed else x @ self.frozen_lm_head.T

    def forward(self, feats: torch.Tensor, ids: torch.Tensor, ttt: int) -> list[torch.Tensor]:
        """Logits of every TTT step for rows P = 0..T-2 (label of step k at row P: ids[P+2+k]).
        Step k's token input is ids[P+1+k] (the ground truth the draft should have produced), its g the
        previous step's pre-norm output, its position P+k."""
        T = ids.numel()
        rows = T - 1
        g = self.fc(feats[:rows])
        cache: list = []
        out = []
        for k in range(ttt):
            idx = torch.arange(rows) + 1 + k
            tok = torch.where(idx < T, ids[idx.clamp(max=T - 1)], torch.zeros_like(idx))
            pos = torch.arange(rows) + k
            g = self.midlayer(self.embed[tok], g, pos, cache)
            out.append(self.logits(g))
        return out


def state_for_export(head: Eagle3Head, d2t: torch.Tensor | None, t2d: torch.Tensor | None) -> dict:
    """SpecForge LlamaForCausalLMEagle3 tensor names (midlayer.*, fc, norm, lm_head, d2t, t2d) that
    llama.cpp's converter renames (conversion/llama.py:215-231)."""
    sd = {k: v.detach().contiguous().float() for k, v in head.state_dict().items()}
    if d2t is not None and t2d is not None:
        sd["d2t"], sd["t2d"] = d2t.contiguous(), t2d.contiguous()
    return sd
