"""Train an EAGLE-3 head on this CPU: the child process of `spectui drafts train-eagle3` (torch env only).

    TORCH_PYTHON eagle3_train.py --target GGUF|HF_DIR --data TRAIN.jsonl --out DIR [--draft-vocab N]
                                 [--ttt K] [--epochs E] [--threads 1] [--max-steps N]

Prints one JSON object a line on stdout (events: phase, progress, done, error) that the parent turns into
its progress bar; writes, in DIR: features.pt (the target's layer inputs, reused by a rerun on the same data),
checkpoint.pt (model + optimizer + position, written atomically every --checkpoint-every seconds and at each
epoch's end, resumed from), head/ (SpecForge's LlamaForCausalLMEagle3 layout: config.json + model.safetensors),
target-hf/ (the target's config and tokenizer, for llama.cpp's convert_hf_to_gguf.py --target-model-dir).
No spectui import: this runs under the torch environment's Python, which has no spectui.
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import json
import os
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eagle3_head as E  # noqa: E402  (the sibling module; this file runs as a script)

# SpecForge weights the loss of TTT step k by 0.8**k (specforge/core/eagle3.py ploss_weight)
STEP_DECAY = 0.8


def emit(event: str, **kw) -> None:
    print(json.dumps({"event": event, **kw}), flush=True)


def load_kept(path: Path):
    """A file this trainer saved (checkpoint, cached features); a damaged one is named in the error event
    (torch raises UnpicklingError, RuntimeError or EOFError), and the run stops: nothing is trained from it."""
    print(f"spectui-trainer: loading {path}", file=sys.stderr, flush=True)
    try:
        return torch.load(path)
    except Exception as exc:  # any failure of the unpickler is a damaged file here
        emit("error", message=f"{path} is corrupt ({type(exc).__name__}: {str(exc)[:120]}): delete it to start afresh")
        raise SystemExit(1) from None


def parse_gguf_once():
    """One parse of a GGUF file per process. transformers (5.19, the torch environment's) builds a GGUFReader
    for the tokenizer and two for the model (8-12 CPU-s each for SmolLM2 here: its 49k-token vocabulary is
    read field by field), and builds llama.cpp's tensor-name map again for each of the model's
    397 names (12.8 CPU-s in all); both are read-only once built (transformers imports them from `gguf` at each
    call, so the module's names are what it gets). load_target on SmolLM2 Q4_1: 45 → 22 CPU-s, the same tensors,
    tokenizer and config. Returns what lets the reader (and its map of the file) go once the target is loaded."""
    import gguf  # lazy: transformers' GGUF reader package, only where the target is a GGUF file

    if getattr(gguf.GGUFReader, "cache_info", None) is None:
        gguf.GGUFReader = functools.lru_cache(maxsize=2)(gguf.GGUFReader)
        gguf.get_tensor_name_map = functools.lru_cache(maxsize=8)(gguf.get_tensor_name_map)
    return gguf.GGUFReader.cache_clear


def load_target(target: str):
    """The target in float32 with transformers (a GGUF dequantised: from_pretrained(dir, gguf_file=name))."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: the training extra, only to train

    p = Path(target)
    done_with_file = parse_gguf_once() if p.is_file() else None
    kw = {"gguf_file": p.name} if p.is_file() else {}
    folder = str(p.parent) if p.is_file() else str(p)
    tok = AutoTokenizer.from_pretrained(folder, **kw)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, **kw)
    # the model's own config, copied (save_target_dir drops a field): AutoConfig.from_pretrained(gguf_file=…)
    # would parse the whole GGUF once more (8.2 CPU-s for SmolLM2-135M Q4_1 here)
    config = copy.deepcopy(model.config)
    if done_with_file:
        done_with_file()
    model.eval()
    return model, tok, config


def save_target_dir(config, tok, out: Path) -> Path:
    """config.json + tokenizer: all convert_hf_to_gguf.py reads from --target-model-dir (conversion/llama.py:64-70)."""
    if (out / "config.json").is_file():
        return out
    tmp = out.with_name(out.name + ".part")
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    os.replace(tmp, out)
    return out


def read_rows(path: Path, tok) -> list[tuple[list[int], list[int]]]:
    """(token ids, loss mask) per record: speculators rows as written (exact ids from the server); chat
    records through the tokenizer's chat template, loss on the last (assistant) turn only."""
    rows = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if "input_ids" in rec:
            ids = [int(t) for t in rec["input_ids"]]
            rows.append((ids, [int(m) for m in rec.get("loss_mask", [1] * len(ids))]))
            continue
        turns = rec.get("messages") or rec.get("conversations") or []
        msgs = [
            {
                "role": {"human": "user", "gpt": "assistant"}.get(t.get("from"), t.get("role", t.get("from"))),
                "content": t.get("content", t.get("value")),
            }
            for t in turns
        ]
        head = tok.apply_chat_template(msgs[:-1], add_generation_prompt=True, tokenize=True)
        full = tok.apply_chat_template(msgs, tokenize=True)
        head = list(head["input_ids"] if isinstance(head, dict) else head)
        full = list(full["input_ids"] if isinstance(full, dict) else full)
        rows.append((full, [0] * len(head) + [1] * (len(full) - len(head))))
    return rows


def fingerprint(*parts) -> str:
    return hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).hexdigest()[:16]


def features(model, rows, layers, out: Path, key: str, name: str = "features.pt") -> list[torch.Tensor]:
    """The aux layers' inputs for every record, cached in DIR/name (a rerun on the same data reuses it)."""
    path = out / name
    if path.is_file():
        cached = load_kept(path)
        if cached.get("key") == key:
            emit("phase", name="features", cached=True, records=len(rows))
            return cached["feats"]
    feats, t0, done = [], time.monotonic(), 0
    total = sum(len(ids) for ids, _ in rows)
    for i, (ids, _) in enumerate(rows):
        f, _logits = E.capture_layer_inputs(model, layers, torch.tensor(ids))
        feats.append(f.clone())
        done += len(ids)
        el = time.monotonic() - t0
        emit(
            "progress",
            phase="features",
            done=i + 1,
            total=len(rows),
            tokens=done,
            seconds=round(el, 2),
            eta=round(el / done * (total - done), 1),
        )
    torch.save({"key": key, "feats": feats}, str(path) + ".part")
    os.replace(str(path) + ".part", path)
    return feats


def head_config(config, layers: list[int], draft_vocab: int) -> dict:
    """SpecForge's LlamaForCausalLMEagle3 config (configs/llama3-8B-eagle3.json shape) for this target."""
    rope = getattr(config, "rope_parameters", None) or {}
    theta = rope.get("rope_theta") or getattr(config, "rope_theta", None) or 10000.0
    h = config.hidden_size
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": h,
        "intermediate_size": config.intermediate_size,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "head_dim": getattr(config, "head_dim", None) or h // config.num_attention_heads,
        "num_hidden_layers": 1,  # the converter's EAGLE-3 test (conversion/llama.py:50)
        "hidden_act": "silu",
        "rms_norm_eps": config.rms_norm_eps,
        "rope_theta": float(theta),
        "max_position_embeddings": config.max_position_embeddings,
        "vocab_size": config.vocab_size,
        "draft_vocab_size": draft_vocab,
        "target_hidden_size": h,
        "eagle_aux_hidden_state_layer_ids": layers,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }


def step_loss(logits: list[torch.Tensor], ids: torch.Tensor, mask: torch.Tensor, t2d_index: torch.Tensor):
    """Weighted cross-entropy over TTT steps on answer positions whose label is in the draft vocabulary;
    returns (loss, [(correct, counted)] per step). Only label positions whose earlier TTT inputs are real
    tokens count (T - 2 - k rows for step k)."""
    T = ids.numel()
    total, stats = torch.zeros(()), []
    for k, lg in enumerate(logits):
        lab_idx = torch.arange(lg.shape[0]) + 2 + k
        ok = lab_idx < T
        lab = ids[lab_idx.clamp(max=T - 1)]
        dlab = t2d_index[lab]
        answer = ok & (mask[lab_idx.clamp(max=T - 1)] > 0)
        keep = answer & (dlab >= 0)
        if keep.sum() == 0:
            stats.append((0, 0, int(answer.sum())))
            continue
        total = total + STEP_DECAY**k * torch.nn.functional.cross_entropy(lg[keep], dlab[keep])
        # (correct, in the draft vocabulary, all answer positions: a label outside the vocabulary is a miss)
        stats.append((int((lg[keep].argmax(-1) == dlab[keep]).sum()), int(keep.sum()), int(answer.sum())))
    return total, stats


def vocab(rows, V: int, size: int):
    """Token frequencies on answer positions → (d2t, t2d, draft ids, t2d index, coverage)."""
    counts = torch.zeros(V, dtype=torch.long)
    for ids, mask in rows:
        t = torch.tensor(ids)[torch.tensor(mask) > 0]
        counts += torch.bincount(t, minlength=V)[:V]
    seen = int(counts.sum())
    if size >= V:
        return None, None, None, torch.arange(V), 1.0
    d2t, t2d, draft_ids = E.trimmed_vocab(counts, size)
    index = torch.full((V,), -1, dtype=torch.long)
    index[draft_ids] = torch.arange(draft_ids.numel())
    coverage = int(counts[draft_ids].sum()) / seen if seen else 0.0
    return d2t, t2d, draft_ids, index, coverage


def evaluate(head, evalset, ttt: int, t2d_index) -> list[float | None]:
    """Top-1 per TTT step on records never trained on (the answers' positions): step 0's is what the
    first drafted token's acceptance would be under greedy verification."""
    agg = [[0, 0] for _ in range(ttt)]
    with torch.no_grad():
        for (ids, mask), f in zip(*evalset):
            ids_t, mask_t = torch.tensor(ids), torch.tensor(mask)
            _, stats = step_loss(head(f, ids_t, ttt), ids_t, mask_t, t2d_index)
            for k, (c, _m, n) in enumerate(stats):
                agg[k][0] += c
                agg[k][1] += n
    return [c / m if m else None for c, m in agg]


def train(head, rows, feats, args, out: Path, t2d_index, key: str) -> dict:
    """The TTT loop, one record a step, shuffled per epoch by a seeded generator (a resume replays the order)."""
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    ck = out / "checkpoint.pt"
    epoch, pos, hist = 0, 0, []
    if ck.is_file():
        state = load_kept(ck)
        if state.get("key") == key:
            head.load_state_dict(state["model"], strict=False)
            opt.load_state_dict(state["opt"])
            epoch, pos, hist = state["epoch"], state["pos"], state["hist"]
            emit("phase", name="resume", epoch=epoch, pos=pos)
    n, t0, last_save, steps_run = len(rows), time.monotonic(), time.monotonic(), 0
    total_steps, done_before = args.epochs * n, epoch * n + pos

    def save():
        sd = {k: v for k, v in head.state_dict().items() if k not in ("embed", "frozen_lm_head")}
        torch.save(
            {"key": key, "model": sd, "opt": opt.state_dict(), "epoch": epoch, "pos": pos, "hist": hist},
            str(ck) + ".part",
        )
        os.replace(str(ck) + ".part", ck)

    while epoch < args.epochs:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(args.seed + epoch)).tolist()
        agg = [[0, 0] for _ in range(args.ttt)]
        while pos < n:
            i = order[pos]
            ids, mask = torch.tensor(rows[i][0]), torch.tensor(rows[i][1])
            warm = min(1.0, (epoch * n + pos + 1) / max(1, args.warmup))
            for g in opt.param_groups:
                g["lr"] = args.lr * warm
            loss, stats = step_loss(head(feats[i], ids, args.ttt), ids, mask, t2d_index)
            if loss.requires_grad:
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 0.5)
                opt.step()
            for k, (c, m, _n) in enumerate(stats):
                agg[k][0] += c
                agg[k][1] += m
            pos += 1
            steps_run += 1
            el = time.monotonic() - t0
            done = epoch * n + pos
            emit(
                "progress",
                phase="train",
                epoch=epoch + 1,
                epochs=args.epochs,
                step=done,
                total=total_steps,
                loss=round(float(loss.detach()), 4),
                seconds=round(el, 1),
                eta=round(el / max(1, done - done_before) * (total_steps - done), 1),
            )
            if time.monotonic() - last_save > args.checkpoint_every:
                save()
                last_save = time.monotonic()
            if args.max_steps and steps_run >= args.max_steps:
                save()
                return {"stopped_early": True, "hist": hist}
        hist.append([c / m if m else None for c, m in agg])
        held = evaluate(head, args.evalset, args.ttt, t2d_index) if args.evalset else None
        args.eval_hist.append(held)
        emit("phase", name="epoch", epoch=epoch + 1, train_accuracy=hist[-1], eval_accuracy=held)
        epoch, pos = epoch + 1, 0
        save()
    return {"stopped_early": False, "hist": hist}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--ttt", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--aux", default="")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint-every", type=float, default=60.0)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--eval", default="", help="records never trained on: top-1 per TTT step after each epoch")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    emit("phase", name="load", target=args.target)
    model, tok, config = load_target(args.target)
    target_dir = Path(args.target) if Path(args.target).is_dir() else save_target_dir(config, tok, out / "target-hf")
    n_layers, V = config.num_hidden_layers, config.vocab_size
    layers = [int(x) for x in args.aux.split(",")] if args.aux else E.default_aux_layers(n_layers)
    rows = read_rows(Path(args.data), tok)
    if not rows:
        emit("error", message=f"{args.data} holds no training records")
        return 2
    t_load = time.monotonic() - t0
    data_sha = hashlib.sha256(Path(args.data).read_bytes()).hexdigest()[:16]
    st = Path(args.target).stat() if Path(args.target).is_file() else None
    fkey = fingerprint(args.target, st.st_size if st else "", data_sha, layers)
    t1 = time.monotonic()
    feats = features(model, rows, layers, out, fkey)
    args.evalset, args.eval_hist = None, []
    if args.eval:
        erows = read_rows(Path(args.eval), tok)
        ekey = fingerprint(fkey, hashlib.sha256(Path(args.eval).read_bytes()).hexdigest()[:16])
        args.evalset = (erows, features(model, erows, layers, out, ekey, "features-eval.pt"))
    t_feat = time.monotonic() - t1
    return finish(args, out, model, config, rows, feats, layers, V, target_dir, fkey, (t_load, t_feat))


def finish(args, out, model, config, rows, feats, layers, V, target_dir, fkey, times) -> int:
    """Vocabulary, head, training, export; the `done` event carries every figure the parent reports."""
    size = min(args.draft_vocab, V)
    d2t, t2d, draft_ids, index, coverage = vocab(rows, V, size)
    cfg = head_config(config, layers, size)
    embed = model.get_input_embeddings().weight.detach()
    lm = model.get_output_embeddings().weight.detach()
    torch.manual_seed(args.seed)
    head = E.Eagle3Head(cfg, embed, lm, draft_ids)
    with torch.no_grad():
        head.norm.weight.copy_(model.model.norm.weight)
    del model
    trainable = sum(p.numel() for p in head.parameters() if p.requires_grad)
    emit(
        "phase",
        name="train",
        trainable=trainable,
        draft_vocab=size,
        coverage=coverage,
        records=len(rows),
        answer_tokens=sum(sum(m) for _, m in rows),
        aux_layers=layers,
    )
    key = fingerprint(fkey, size, args.ttt, args.lr, args.seed)  # not epochs: a rerun with more resumes
    t2 = time.monotonic()
    result = train(head, rows, feats, args, out, index, key)
    t_train = time.monotonic() - t2
    from safetensors.torch import save_file  # lazy: torch (the training extra), only when the head is saved

    hd = out / "head"
    tmp = out / "head.part"
    tmp.mkdir(exist_ok=True)
    save_file(E.state_for_export(head, d2t, t2d), str(tmp / "model.safetensors"))
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    if hd.exists():
        for f in hd.iterdir():
            f.unlink()
        hd.rmdir()
    os.replace(tmp, hd)
    emit(
        "done",
        head=str(hd),
        target_dir=str(target_dir),
        trainable=trainable,
        draft_vocab=size,
        coverage=coverage,
        aux_layers=layers,
        records=len(rows),
        answer_tokens=sum(sum(m) for _, m in rows),
        tokens=sum(len(i) for i, _ in rows),
        train_accuracy=result["hist"],
        eval_accuracy=args.eval_hist,
        stopped_early=result["stopped_early"],
        seconds={"load": round(times[0], 1), "features": round(times[1], 1), "train": round(t_train, 1)},
        max_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        threads=args.threads,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
