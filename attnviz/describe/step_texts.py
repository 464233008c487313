"""What the pages say about each step: its title, its formula (LaTeX, following the trace's
scale and mask) and one sentence of explanation. Title and explanation are Messages (ids
``step.<name>.title…`` and ``step.<name>.explanation…``), rendered when read, in the reader's
language; the formulas stay LaTeX. The core's steps (attnviz.core.trace) carry a
name, an array and the trace's facts; attnviz.describe registers ``describe_step`` with the core,
so ``step.title``, ``step.formula`` and ``step.explanation`` are written here, when read."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from attnviz.core.trace import StepFacts, StepText
from attnviz.describe.scale import scale_kind
from attnviz.i18n import Message as M


@dataclass(frozen=True)
class _Scaling:
    scores: str          # LaTeX of the scaled scores in terms of Q and K
    step_formula: str    # LaTeX of the scaling step
    explanation: M


def _scaling_texts(scale: float, d_k: int, qk: str = r"Q_h K_h^{\top}",
                   scalar: float | None = None) -> _Scaling:
    """The scaling as the formulas write it: ÷√d_k, none (scale 1), or another factor, given
    exactly (its shortest round-trip decimal); with a model's query_pre_attn_scalar `scalar`
    (Gemma), ÷√scalar, whatever d_k is. qk: the LaTeX of the product scaled."""
    if scalar is not None:
        root = _base_text(scalar)
        return _Scaling(rf"\frac{{{qk}}}{{\sqrt{{{root}}}}}",
                        rf"\frac{{S_h}}{{\sqrt{{\text{{query\_pre\_attn\_scalar}}}}}} = "
                        rf"\frac{{S_h}}{{\sqrt{{{root}}}}} = {scale!r}\, S_h",
                        M("step.scaled_scores.explanation_scalar", scalar=root,
                          scale=repr(scale),
                          same=M("step.scaled_scores.scalar_same" if
                                 scale_kind(scale, d_k) == "sqrt_dk" else
                                 "step.scaled_scores.scalar_differs", d_k=d_k)))
    kind = scale_kind(scale, d_k)
    if kind == "sqrt_dk":
        return _Scaling(rf"\frac{{{qk}}}{{\sqrt{{d_k}}}}",
                        rf"\frac{{S_h}}{{\sqrt{{d_k}}}} = \frac{{S_h}}{{\sqrt{{{d_k}}}}}",
                        M("step.scaled_scores.explanation"))
    if kind == "none":
        return _Scaling(qk, r"S_h \;(\text{no scaling})",
                        M("step.scaled_scores.explanation_off"))
    return _Scaling(rf"{scale!r}\, {qk}", rf"{scale!r}\, S_h",
                    M("step.scaled_scores.explanation_factor", scale=repr(scale)))


def describe_step(name: str, facts: StepFacts) -> StepText:
    """Step `name`'s title, formula and explanation for a trace with these facts (the core's
    steps read them here: attnviz.describe registers this function with the core)."""
    return _texts(facts)[name]


@functools.lru_cache(maxsize=256)
def _texts(f: StepFacts) -> dict[str, StepText]:
    """Every step's texts for traces with facts `f`; formulas follow the tutorials."""
    src = "C" if f.cross else "X"
    g = f.kv_group
    design = f.design
    kv = "h" if g == 1 else rf"\lfloor h/{g} \rfloor"       # the K/V head query head h reads

    def b(name: str, head: str = "h") -> str:  # a projection's bias term, when there are biases
        if not f.biased:
            return ""
        return f" + b^{{{name}}}_h" if head == "h" else f" + b^{{{name}}}_{{{head}}}"

    s = {}
    if f.projected:
        s["x"] = StepText(M("step.x.title"), r"X \in \mathbb{R}^{n \times d_{model}}",
                          M("step.x.explanation"))
        s["context"] = StepText(M("step.context.title"),
                                r"C \in \mathbb{R}^{m \times d_{context}}",
                                M("step.context.explanation"))
        s["q"] = StepText(M("step.q.title"), rf"Q_h = X W^Q_h{b('Q')}",
                          M("step.q.explanation"))
        if f.num_kv_heads == 1 and g > 1:                     # multi-query: one K/V head
            kv = "0"
        s["k"] = StepText(M("step.k.title"), rf"K_h = {src} W^K_{{{kv}}}{b('K', kv)}",
                          M("step.k.explanation")
                          if g == 1 else _shared_heads("key", g, f.num_kv_heads))
        s["v"] = StepText(M("step.v.title"), rf"V_h = {src} W^V_{{{kv}}}{b('V', kv)}",
                          M("step.v.explanation")
                          if g == 1 else _shared_heads("value", g, f.num_kv_heads))
    else:
        for n in ("q", "k", "v"):
            s[n] = StepText(M(f"step.{n}.title_entered"), rf"{n.upper()}_h",
                            M(f"step.{n}.explanation_entered"))
    rotary = f.rope_base is not None
    s.update(_qk_norm_texts())               # used only by a trace that has the steps
    if rotary:
        s.update(_rotation_texts(f.rope_base, design))
    qk = r"\tilde{Q}_h \tilde{K}_h^{\top}" if rotary else r"Q_h K_h^{\top}"
    scaling = _scaling_texts(f.scale, f.d_k, qk,
                             None if design is None else design.attn_scalar)
    s["scores"] = StepText(
        M("step.scores.title_rotated") if rotary else M("step.scores.title"), rf"S_h = {qk}",
        M("step.scores.explanation_rotated") if rotary else M("step.scores.explanation"))
    s["scaled_scores"] = StepText(M("step.scaled_scores.title"), scaling.step_formula,
                                  scaling.explanation)
    masked = f.mask is not None
    s["masked_scores"] = StepText(
        M("step.masked_scores.title"),
        rf"{scaling.scores} + M_h,\; " + (_window_formula(design) if _windowed(design)
                                          else r"M_h[i, j] = -\infty\text{ where masked}"
                                          if f.mask == "bool"
                                          else r"M_h = \text{the float mask, added}"),
        _mask_explanation(design))
    s["weights"] = (
        StepText(M("step.weights.title"),
                 r"A_h = \mathrm{softmax}_{\text{row}}\left(" + scaling.scores
                 + (r" + M_h" if masked else "") + r"\right)",
                 M("step.weights.explanation"))
        if f.weights_given is None else
        StepText(M("step.weights.title_given"), r"A_h = \text{given weights}",
                 f.weights_given))
    s["weighted_values"] = StepText(M("step.weighted_values.title"), r"A_h[i, j] \, v_j",
                                    M("step.weighted_values.explanation"))
    s["z"] = StepText(M("step.z.title"), r"Z_h = A_h V_h = \sum_j A_h[i, j]\, v_j",
                      M("step.z.explanation"))
    s["concat"] = StepText(M("step.concat.title"),
                           r"\mathrm{Concat}(Z_1, \dots, Z_H) \in \mathbb{R}^{n \times H d_v}",
                           M("step.concat.explanation"))
    s["output"] = StepText(M("step.output.title"),
                           r"\mathrm{MultiHead}(X) = \mathrm{Concat}(Z_1, \dots, Z_H)\, W^O"
                           + (r" + b^O" if f.biased else ""),
                           M("step.output.explanation"))
    if design is not None:
        s.update(_design_texts(design))
    return s


def _windowed(design) -> bool:
    return design is not None and design.kind is not None


def _window_formula(design) -> str:
    """The mask of a layer of a model with sliding and global layers, in LaTeX."""
    if design.kind == "sliding":
        return (rf"M_h[i, j] = -\infty\text{{ where }} j > i\text{{ or }} "
                rf"i - j \geq {design.window}")
    return r"M_h[i, j] = -\infty\text{ where } j > i"


def _mask_explanation(design) -> M:
    """The masked scores' sentence: the causal mask, or a layer's sliding window or its
    global reach."""
    if not _windowed(design):
        return M("step.masked_scores.explanation")
    if design.kind == "sliding":
        if design.window_applies:
            return M("step.masked_scores.explanation_window", layer=design.layer,
                     window=design.window, back=design.window - 1)
        return M("step.masked_scores.explanation_window_fits", layer=design.layer,
                 window=design.window)
    return M("step.masked_scores.explanation_global", layer=design.layer,
             layers=", ".join(map(str, design.full_layers)))


def _design_texts(design) -> dict[str, StepText]:
    """The steps a real decoder layer adds around attention: the embeddings × √d_model, the
    norm after attention."""
    s = {"x": StepText(M("step.x.title"),
                       r"X = \mathrm{RMSNorm}(h^{(\ell)}) \in \mathbb{R}^{n \times d_{model}}",
                       M("step.x.explanation_layer", layer=design.layer))}
    if design.embed_scale != 1.0:
        s["embedded"] = StepText(
            M("step.embedded.title"),
            rf"h^{{(0)}} = E[\text{{ids}}] \cdot \sqrt{{d_{{model}}}} = E[\text{{ids}}] \cdot "
            rf"\sqrt{{{design.d_model}}} \approx E[\text{{ids}}] \cdot {design.embed_scale:.2f}",
            M("step.embedded.explanation", d_model=design.d_model,
              factor=f"{design.embed_scale:.2f}", layer=design.layer))
    if design.post_norm:
        s["output_normed"] = StepText(
            M("step.output_normed.title"),
            r"\mathrm{RMSNorm}(O) = \frac{O}{\sqrt{\mathrm{mean}(O^2) + \epsilon}} \odot "
            r"g_{\text{post}},\; h \leftarrow h + \mathrm{RMSNorm}(O)",
            M("step.output_normed.explanation"))
    return s


def _shared_heads(what: str, group: int, kv_heads: int) -> M:
    """The explanation of K or V under grouped-query attention (one K/V head: multi-query)."""
    if kv_heads == 1:
        return M(f"step.{'k' if what == 'key' else 'v'}.explanation_multi_query", group=group)
    return M(f"step.{'k' if what == 'key' else 'v'}.explanation_grouped", count=kv_heads,
             group=group)


def _base_text(base: float) -> str:
    """The rotary base as the formulas print it: 10000 for 10000.0, else its repr."""
    return str(int(base)) if float(base).is_integer() and abs(base) < 1e15 else repr(base)


def _qk_norm_texts() -> dict[str, StepText]:
    """q_normed and k_normed: QK-norm, each head's q and k RMS-normed before RoPE."""
    return {
        name: StepText(
            M(f"step.{name}.title"),
            rf"\hat{{{big}}}_h = \frac{{{big}_h}}{{\sqrt{{\mathrm{{mean}}({big}_h^2) + \epsilon}}}}"
            rf" \odot g_{{{small}}}",
            M(f"step.{name}.explanation"))
        for name, big, small in (("q_normed", "Q", "q"), ("k_normed", "K", "k"))}


def _rotation_texts(rope_base: float, design=None) -> dict[str, StepText]:
    """q_rotated and k_rotated: RoPE's turn of each feature pair by position × frequency; on
    a model with sliding and global layers, the base this layer's kind has."""
    base = _base_text(rope_base)
    theta = rf"\Theta_{{p,i}} = p \cdot {base}^{{-2i/d_k}}"
    if _windowed(design):
        kind = "local" if design.kind == "sliding" else "global"
        return {
            name: StepText(M(f"step.{name}.title"), rf"\tilde{{{big}}}_h = {big}_h \odot "
                           rf"\cos\Theta + \mathrm{{rotate\_half}}({big}_h) \odot \sin\Theta,"
                           rf"\; {theta}",
                           M(f"step.rotated.explanation_{kind}", base=f"{rope_base:,.0f}",
                             layer=design.layer))
            for name, big in (("q_rotated", "Q"), ("k_rotated", "K"))}
    return {
        "q_rotated": StepText(
            M("step.q_rotated.title"),
            rf"\tilde{{Q}}_h = Q_h \odot \cos\Theta + \mathrm{{rotate\_half}}(Q_h) \odot "
            rf"\sin\Theta,\; {theta}",
            M("step.q_rotated.explanation")),
        "k_rotated": StepText(
            M("step.k_rotated.title"),
            rf"\tilde{{K}}_h = K_h \odot \cos\Theta + \mathrm{{rotate\_half}}(K_h) \odot "
            rf"\sin\Theta,\; {theta}",
            M("step.k_rotated.explanation")),
    }
