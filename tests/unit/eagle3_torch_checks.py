"""EAGLE-3 conventions of spectui/labs/drafts/eagle3_head.py checked against references computed another way.

Run by tests/unit/test_eagle3_conventions.py with the torch environment's Python (`spectui setup --vllm`):
    TORCH_PYTHON tests/unit/eagle3_torch_checks.py CHECK
Each check prints "ok CHECK" or raises. A tiny random Llama built by transformers stands in for the target.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spectui" / "labs" / "drafts"))
import eagle3_head as E  # noqa: E402


def tiny_target():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=97,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=8,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=128,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(cfg).eval(), cfg


def head_cfg(h=48):
    return {
        "hidden_size": h,
        "target_hidden_size": h,
        "intermediate_size": 96,
        "num_attention_heads": 6,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
    }


def check_prehook():
    """The pre-hook tensor at layer L is transformers' hidden_states[L] (the input of layer L), not [L+1]."""
    model, cfg = tiny_target()
    ids = torch.randint(0, 97, (11,))
    layers = E.default_aux_layers(cfg.num_hidden_layers)
    assert layers == [2, 4, 5], layers
    feats, _ = E.capture_layer_inputs(model, layers, ids)
    with torch.no_grad():
        hs = model(input_ids=ids[None], output_hidden_states=True).hidden_states
    ref = torch.cat([hs[L][0] for L in layers], dim=-1)
    assert torch.allclose(feats, ref, atol=1e-6), (feats - ref).abs().max()
    wrong = torch.cat([hs[L + 1][0] for L in layers], dim=-1)
    assert not torch.allclose(feats, wrong, atol=1e-3)


def check_pairs():
    """speculative.cpp:480-512: at pos P the pair (token[P+1], g[P]) predicts token[P+2]; TTT step k shifts by k."""
    assert E.pairs(5) == [(0, 1, 2), (1, 2, 3), (2, 3, 4)]
    assert E.pairs(5, step=1) == [(0, 2, 3), (1, 3, 4)]
    assert E.pairs(2) == []


def rms(x, w, eps=1e-5):
    return w * x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def manual_row(head, feats, ids, P, g_in=None):
    """Step 0 at row P written out by hand, with transformers' own RoPE and repeat_kv: the reference."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, repeat_kv

    m, a = head.midlayer, head.midlayer.self_attn
    g = head.fc(feats[: P + 1]) if g_in is None else g_in
    x = torch.cat([rms(head.embed[ids[1 : P + 2]], m.input_layernorm.weight), rms(g, m.hidden_norm.weight)], -1)
    q = a.q_proj(x).view(1, P + 1, 6, 8).transpose(1, 2)
    k = a.k_proj(x).view(1, P + 1, 2, 8).transpose(1, 2)
    v = a.v_proj(x).view(1, P + 1, 2, 8).transpose(1, 2)
    inv = 1.0 / (10000.0 ** (torch.arange(0, 8, 2).float() / 8))
    ang = torch.arange(P + 1).float()[:, None] * inv[None]
    emb = torch.cat([ang, ang], -1)[None]
    q, k = apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())
    k, v = repeat_kv(k, 3), repeat_kv(v, 3)
    w = torch.softmax((q[:, :, -1:] @ k.transpose(-1, -2)) / 8**0.5, -1)
    o = a.o_proj((w @ v).transpose(1, 2).reshape(1, 48))[0]
    h = o + g[-1]  # the residual is the raw g (norm_before_residual false)
    pre = h + m.mlp(rms(h, m.post_attention_layernorm.weight))
    return pre


def make_head(trimmed=None):
    torch.manual_seed(1)
    embed, lm = torch.randn(97, 48), torch.randn(97, 48)
    head = E.Eagle3Head(head_cfg(), embed, lm, trimmed)
    for p in head.parameters():
        torch.nn.init.normal_(p, std=0.2)
    return head


def check_forward():
    """Step 0 at row P equals the hand-written decoder (concat [emb, g], raw-g residual, pre-norm output,
    causal over rows <= P), and the logits are the norm of that pre-norm state through the LM head."""
    head = make_head()
    feats, ids = torch.randn(9, 144), torch.randint(0, 97, (9,))
    with torch.no_grad():
        out = head(feats, ids, 1)
        for P in (0, 3, 7):
            pre = manual_row(head, feats, ids, P)
            ref = rms(pre, head.norm.weight) @ head.frozen_lm_head.T
            assert torch.allclose(out[0][P], ref, atol=1e-4), (P, (out[0][P] - ref).abs().max())


def check_ttt():
    """Step 1 at row P: token ids[P+2], g = step 0's pre-norm output at P, position P+1, keys = step-0 keys
    of rows <= P plus its own (speculators eagle3/attention.py diagonal; llama.cpp's draft KV while drafting)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, repeat_kv

    head = make_head()
    feats, ids = torch.randn(8, 144), torch.randint(0, 97, (8,))
    m, a = head.midlayer, head.midlayer.self_attn
    with torch.no_grad():
        out = head(feats, ids, 2)
        g0 = head.fc(feats[:7])
        x0 = torch.cat([rms(head.embed[ids[1:8]], m.input_layernorm.weight), rms(g0, m.hidden_norm.weight)], -1)
        pre0 = torch.stack([manual_row(head, feats, ids, P) for P in range(7)])
        P = 4
        x1 = torch.cat([rms(head.embed[ids[P + 2]], m.input_layernorm.weight), rms(pre0[P], m.hidden_norm.weight)])
        xs = torch.cat([x0[: P + 1], x1[None]], 0)  # keys: step-0 rows 0..P, then the step-1 row
        pos = torch.cat([torch.arange(P + 1), torch.tensor([P + 1])]).float()
        inv = 1.0 / (10000.0 ** (torch.arange(0, 8, 2).float() / 8))
        emb = torch.cat([pos[:, None] * inv, pos[:, None] * inv], -1)[None]
        q = a.q_proj(xs).view(1, P + 2, 6, 8).transpose(1, 2)
        k = a.k_proj(xs).view(1, P + 2, 2, 8).transpose(1, 2)
        v = a.v_proj(xs).view(1, P + 2, 2, 8).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())
        k, v = repeat_kv(k, 3), repeat_kv(v, 3)
        w = torch.softmax((q[:, :, -1:] @ k.transpose(-1, -2)) / 8**0.5, -1)
        h = a.o_proj((w @ v).transpose(1, 2).reshape(1, 48))[0] + pre0[P]
        pre1 = h + m.mlp(rms(h, m.post_attention_layernorm.weight))
        ref = rms(pre1, head.norm.weight) @ head.frozen_lm_head.T
        assert torch.allclose(out[1][P], ref, atol=1e-4), (out[1][P] - ref).abs().max()


def check_vocab():
    """d2t holds offsets: d2t[i] + i is the i-th kept target id (what conversion/llama.py:343 undoes), ids
    ascending and unique, the most frequent kept, t2d marks exactly them; the trimmed LM head rows are the
    target's rows of those ids."""
    counts = torch.zeros(97, dtype=torch.long)
    counts[[5, 50, 7, 90]] = torch.tensor([10, 9, 8, 1])
    d2t, t2d, ids = E.trimmed_vocab(counts, 6)
    absolute = d2t + torch.arange(6)
    assert absolute.tolist() == sorted(absolute.tolist()) and len(set(absolute.tolist())) == 6
    assert {5, 50, 7, 90} <= set(absolute.tolist()) and set(absolute.tolist()) == {0, 1, 5, 7, 50, 90}
    assert t2d.sum() == 6 and t2d[absolute].all()
    embed, lm = torch.randn(97, 48), torch.randn(97, 48)
    fresh = E.Eagle3Head(head_cfg(), embed, lm, ids)
    assert torch.equal(fresh.lm_head.weight, lm[absolute]) and fresh.lm_head.weight.shape == (6, 48)


CHECKS = {
    "prehook": check_prehook,
    "pairs": check_pairs,
    "forward": check_forward,
    "ttt": check_ttt,
    "vocab": check_vocab,
}

if __name__ == "__main__":
    import traceback

    torch.set_num_threads(1)
    failed = 0
    for name in sys.argv[1:] or list(CHECKS):  # one failing does not stop the others
        try:
            CHECKS[name]()
        except Exception:
            failed += 1
            print(f"FAILED {name}\n{traceback.format_exc()}", flush=True)
        else:
            print("ok", name, flush=True)
    sys.exit(1 if failed else 0)
