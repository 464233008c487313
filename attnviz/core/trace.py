"""The trace: every intermediate of one attention call, named and shaped for display.

Axis order everywhere: (head, query, key, feature). Shapes: H heads, n_q queries, n_k keys.
The computation that fills it is in attnviz.core.engine. The core holds no prose and writes no
files: a step's title, formula and explanation come from the describe layer
(attnviz.describe.step_texts), the trace's files from the io layer (attnviz.io.files); each
registers itself here when imported, and ``import attnviz`` imports both.

Grouped-query attention (H_kv key/value heads shared by H query heads): k, v, k_rotated hold,
for every query head h, the key/value head it reads (``grouped_query.kv_head``), so every
per-head field has H heads and a page can take any head of any step; ``k_shared`` and
``v_shared`` are the H_kv heads as projected (and as a KV cache keeps them).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import IO, Protocol

import numpy as np

from attnviz.core.arrays import whole_number
from attnviz.core.errors import AttnvizInputError
from attnviz.core.grouped_query import kv_head, shared_kv
from attnviz.core.hook_names import transformer_lens_names
from attnviz.core.rotary import rope_angles, rope_frequencies
from attnviz.core.weights import MultiHeadWeights
from attnviz.i18n import Message


@dataclass(frozen=True)
class StepFacts:
    """What a step's texts depend on, no arrays: whether X was projected (not Q, K, V entered),
    cross-attention, W_O, biases, grouped K/V heads, the scale, rotary positions, the mask, and
    why the weights are given (not the softmax). Shared by all steps of a trace."""

    projected: bool
    cross: bool
    has_output: bool
    biased: bool
    kv_group: int
    num_kv_heads: int
    scale: float
    d_k: int
    rope_base: float | None
    mask: str | None              # "bool" (−∞ at masked cells), "float" (added), None
    weights_given: str | Message | None
    design: "LayerDesign | None" = None   # a real decoder layer's designs (with_design)


@dataclass(frozen=True)
class LayerDesign:
    """What a real decoder's layer adds around the attention the engine computes, as its
    config says (Gemma 3's designs; Llama's layers have none of them): the layer's number, its
    kind where the model has two ("sliding": a window of `window` keys, itself included;
    "full": every earlier key; None: one kind only), the global layers' numbers, the scores'
    query_pre_attn_scalar (scale 1/√scalar; None: 1/√d_k), the embeddings' factor
    (√d_model; 1: none), d_model, and whether attention's output is RMS-normed before it joins
    the residual stream. No arrays: a step's texts read it."""

    layer: int
    kind: str | None = None
    window: int | None = None
    full_layers: tuple[int, ...] = ()
    attn_scalar: float | None = None
    embed_scale: float = 1.0
    d_model: int = 0
    post_norm: bool = False
    window_applies: bool = False     # the text is longer than the window: the band masks keys


@dataclass(frozen=True)
class StepText:
    """What a page says about a step."""

    title: str | Message           # a Message: rendered when read, in the reader's language
    formula: str                   # LaTeX
    explanation: str | Message     # one sentence


class Describer(Protocol):
    def __call__(self, name: str, facts: StepFacts) -> StepText: ...


class OnDemand(Protocol):
    """A step's array made when asked (called), whose shape is known without making it."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def __call__(self) -> np.ndarray: ...


class Writers(Protocol):
    def to_npz(self, trace, file, tokens_q=None, tokens_k=None) -> None: ...
    def to_csv_zip(self, trace, file, tokens_q=None, tokens_k=None) -> None: ...
    def to_json(self, trace, tokens_q=None, tokens_k=None) -> str: ...


@dataclass
class _Plugins:
    describe: Describer | None = None      # set by attnviz.describe
    files: Writers | None = None            # set by attnviz.io.files


_PLUGINS = _Plugins()


def set_step_describer(describe: Describer) -> None:
    """The function that writes a step's title, formula and explanation from its name and
    facts (attnviz.describe registers it when imported)."""
    _PLUGINS.describe = describe


def set_trace_writers(writers: Writers) -> None:
    """What writes a trace's .npz, CSV zip and JSON (attnviz.io.files registers itself)."""
    _PLUGINS.files = writers


def _plugin(kind: str):
    found = getattr(_PLUGINS, kind)
    if found is None:      # only when attnviz/__init__ failed half-way: it imports both
        raise RuntimeError(f"no {kind} layer registered: import attnviz first")
    return found


@dataclass(frozen=True)
class Step:
    """One step of the computation, as the pages show it.

    axes names the array's axes, e.g. ("head", "query", "key"); "head" first means one slice per
    head. A step computed on demand (weighted values) stores nothing: its `array` is computed
    at each access, for all heads; pages take one head with ``trace.step_array(name, head)``.
    Its title, LaTeX formula and one-sentence explanation are written, when read, by the
    describe layer from the step's name and the trace's facts.
    """

    name: str
    stored: np.ndarray | None
    axes: tuple[str, ...]
    facts: StepFacts = field(repr=False)
    compute: OnDemand | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> StepText:
        return _plugin("describe")(self.name, self.facts)

    @property
    def title(self) -> str:
        """In the active language."""
        return str(self.text.title)

    @property
    def title_message(self) -> str | Message:
        """The title as a Message (rendered when shown, in its reader's language)."""
        return self.text.title

    @property
    def formula(self) -> str:
        """LaTeX, following the trace's scale, mask, biases and K/V heads."""
        return self.text.formula

    @property
    def explanation(self) -> str:
        """In the active language."""
        return str(self.text.explanation)

    @property
    def array(self) -> np.ndarray:
        """The step's numbers; for an on-demand step, computed now (never kept)."""
        return self.stored if self.compute is None else self.compute()

    @property
    def on_demand(self) -> bool:
        return self.compute is not None

    @property
    def per_head(self) -> bool:
        return self.axes[0] == "head"

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape, without computing an on-demand step."""
        if self.stored is not None:
            return self.stored.shape
        return self.compute.shape

    def __repr__(self) -> str:
        return f"Step({self.name!r}, shape={self.shape}, axes={self.axes})"


@dataclass(frozen=True, eq=False)
class AttentionTrace:
    """Every intermediate of one attention call. Shapes: H heads, n_q queries, n_k keys."""

    x: np.ndarray | None              # (n_q, d_model)
    context: np.ndarray | None        # (n_k, d_context)
    q: np.ndarray                     # (H, n_q, d_k)
    k: np.ndarray                     # (H, n_k, d_k)
    v: np.ndarray                     # (H, n_k, d_v)
    scores: np.ndarray                # (H, n_q, n_k)  Q Kᵀ
    scaled_scores: np.ndarray         # (H, n_q, n_k)  scores × scale
    masked_scores: np.ndarray         # (H, n_q, n_k)  −inf where masked, float mask added
    weights: np.ndarray               # (H, n_q, n_k)  softmax over keys
    z: np.ndarray                     # (H, n_q, d_v)  weights @ V
    concat: np.ndarray                # (n_q, H*d_v)
    output: np.ndarray                # (n_q, d_out)
    scale: float
    mask: np.ndarray | None           # bool (H, n_q, n_k), True = masked (−inf); None = no mask
    params: MultiHeadWeights | None = None   # W_Q, W_K, W_V, W_O and biases; None for trace_qkv
    has_mask: bool = False            # a mask (bool or float) took part: masked_scores differs
    weights_given: str | Message | None = None  # why the weights are given, not softmax
    # what the warnings say, as Messages (a trace is shared between readers of two languages)
    warning_messages: list[Message] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    # rotary positions (RoPE); all None when off
    q_rotated: np.ndarray | None = field(default=None, repr=False)  # (H, n_q, d_k)
    k_rotated: np.ndarray | None = field(default=None, repr=False)  # (H, n_k, d_k)
    rope_base: float | None = None
    q_positions: np.ndarray | None = field(default=None, repr=False)  # (n_q,) int
    k_positions: np.ndarray | None = field(default=None, repr=False)  # (n_k,) int
    # grouped-query attention: query heads per key/value head (1 = ordinary multi-head)
    kv_group: int = 1
    # QK-norm: each head's q and k RMS-normed before RoPE; None when off
    q_normed: np.ndarray | None = field(default=None, repr=False)   # (H, n_q, d_k)
    k_normed: np.ndarray | None = field(default=None, repr=False)   # (H, n_k, d_k)
    # a real decoder layer (engine.with_design): its designs, the embeddings × embed_scale
    # (the stream before layer 0) and attention's output RMS-normed before it joins the stream
    design: LayerDesign | None = None
    embedded: np.ndarray | None = field(default=None, repr=False)       # (n_q, d_model)
    output_normed: np.ndarray | None = field(default=None, repr=False)  # (n_q, d_model)

    @property
    def num_heads(self) -> int:
        return self.q.shape[0]

    @property
    def num_kv_heads(self) -> int:
        """Key/value heads, H_kv = H / kv_group (H without grouped-query attention)."""
        return self.num_heads // self.kv_group

    def kv_head(self, head: int) -> int:
        """The key/value head query head `head` reads (grouped-query attention)."""
        return kv_head(self._check_head(head), self.num_heads, self.num_kv_heads)

    @property
    def k_shared(self) -> np.ndarray:
        """(H_kv, n_k, d_k): the keys once per key/value head, as projected (unrotated)."""
        return shared_kv(self.k, self.num_kv_heads)

    @property
    def v_shared(self) -> np.ndarray:
        """(H_kv, n_k, d_v): the values once per key/value head."""
        return shared_kv(self.v, self.num_kv_heads)

    @property
    def rope_frequencies(self) -> np.ndarray | None:
        """(d_k/2,) base^(−2i/d_k): radians per position of feature pair (i, i + d_k/2);
        None without rotary positions."""
        if self.rope_base is None:
            return None
        return rope_frequencies(self.d_k, self.rope_base)

    @property
    def rope_angles(self) -> np.ndarray | None:
        """(n_k, d_k/2) radians: the angle each key position's feature pair i is turned by,
        k_positions[j] · base^(−2i/d_k) (in self-attention the queries' too); None without
        rotary positions."""
        if self.rope_base is None:
            return None
        return rope_angles(self.k_positions, self.d_k, self.rope_base)

    @property
    def rope_angles_q(self) -> np.ndarray | None:
        """(n_q, d_k/2) radians at the queries' positions; None without rotary positions."""
        if self.rope_base is None:
            return None
        return rope_angles(self.q_positions, self.d_k, self.rope_base)

    @property
    def n_q(self) -> int:
        return self.q.shape[1]

    @property
    def n_k(self) -> int:
        return self.k.shape[1]

    @property
    def d_k(self) -> int:
        return self.q.shape[2]

    @property
    def d_v(self) -> int:
        return self.v.shape[2]

    def weighted_values(self, head: int, query: int | None = None) -> np.ndarray:
        """(n_q, n_k, d_v): weights[head, i, j] · v[head, j], each value vector scaled by its
        weight before the sum over keys (the tutorials' "weighted values"). With `query`, that
        query's (n_k, d_v) alone, the same numbers without the whole (n_q times larger) array:
        what a page draws (at 512 tokens and d_v 1024 the whole is a gigabyte)."""
        head = self._check_head(head)
        if query is None:
            return self.weights[head][:, :, None] * self.v[head][None, :, :]
        query = whole_number(query, "query", low=0, high=self.n_q - 1)
        return self.weights[head, query][:, None] * self.v[head]

    @property
    def warnings(self) -> list[str]:
        """E.g. a query row whose keys are all masked, in the active language."""
        return [str(m) for m in self.warning_messages]

    def step(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name:
                return s
        raise AttnvizInputError("error.trace.no_step", name=repr(name),
                                steps=", ".join(s.name for s in self.steps))

    def step_array(self, name: str, head: int = 0) -> np.ndarray:
        """The array a page draws for step `name`: one head's slice of per-head steps."""
        s = self.step(name)
        if s.on_demand:
            return self.weighted_values(head)
        return s.array[self._check_head(head)] if s.per_head else s.array

    # ---- in a notebook ------------------------------------------------------------------------
    def _summary(self) -> list[tuple[str, str]]:
        """The sizes and settings, as (name, value): what the repr and its HTML table show."""
        mask = "none" if not self.has_mask else ("bool" if self.mask is not None else "float")
        rows = [("heads", str(self.num_heads))]
        if self.kv_group > 1:
            rows.append(("kv_heads", str(self.num_kv_heads)))
        rows += [("n_q", str(self.n_q)), ("n_k", str(self.n_k)), ("d_k", str(self.d_k)),
                 ("d_v", str(self.d_v)), ("scale", repr(float(self.scale))), ("mask", mask),
                 ("dtype", str(self.q.dtype))]
        if self.rope_base is not None:
            rows.append(("rope_base", repr(self.rope_base)))
        if self.context is not None:
            rows.append(("cross", "True"))
        if self.weights_given is not None:
            rows.append(("weights_given", str(self.weights_given)))
        if self.warnings:
            rows.append(("warnings", str(len(self.warnings))))
        return rows

    def __repr__(self) -> str:
        """A screenful: the sizes and settings, then each step's name, shape and axes (the
        numbers stay in the arrays, as TransformerLens's ActivationCache prints its keys)."""
        names = max((len(s.name) for s in self.steps), default=0)
        shapes = max((len(str(s.shape)) for s in self.steps), default=0)
        lines = [f"AttentionTrace({', '.join(f'{k}={v}' for k, v in self._summary())})"]
        lines += [f"  {s.name:<{names}}  {str(s.shape):<{shapes}}  ({', '.join(s.axes)})"
                  + ("  on demand" if s.on_demand else "") for s in self.steps]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The same as a small HTML table for Jupyter; every text escaped."""
        e = html.escape
        settings = ", ".join(f"{e(k)}={e(v)}" for k, v in self._summary())
        rows = "".join(f"<tr><td><code>{e(s.name)}</code></td><td>{e(str(s.shape))}</td>"
                       f"<td>{e(', '.join(s.axes))}</td></tr>" for s in self.steps)
        warnings = "".join(f"<li>{e(str(w))}</li>" for w in self.warnings)
        return (f"<div><b>AttentionTrace</b> <small>{settings}</small>"
                "<table><thead><tr><th>step</th><th>shape</th><th>axes</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>"
                + (f"<ul>{warnings}</ul>" if warnings else "") + "</div>")

    def to_transformer_lens_names(self, layer: int = 0) -> dict[str, np.ndarray]:
        """The arrays under TransformerLens's hook names (``blocks.{layer}.attn.hook_q`` …),
        in its axis order without the batch: q (pos, head, d_head), the pattern (head, q_pos,
        k_pos). The table, and what maps to what, in :mod:`attnviz.core.hook_names`."""
        return transformer_lens_names(self, layer)

    # ---- taking it out (attnviz.io.files) -------------------------------------------------------
    def to_npz(self, file: str | IO[bytes], tokens_q: list[str] | None = None,
               tokens_k: list[str] | None = None) -> None:
        """Every intermediate by field name, the token labels, W_Q … W_O and biases, and the
        settings, to a .npz path or binary file object (``MultiHeadWeights.from_npz`` reads the
        weights back)."""
        _plugin("files").to_npz(self, file, tokens_q, tokens_k)

    def to_csv_zip(self, file: str | IO[bytes], tokens_q: list[str] | None = None,
                   tokens_k: list[str] | None = None) -> None:
        """A zip with one CSV per array (per head), token labels as row/column headers."""
        _plugin("files").to_csv_zip(self, file, tokens_q, tokens_k)

    def to_json(self, tokens_q: list[str] | None = None,
                tokens_k: list[str] | None = None) -> str:
        """Every intermediate and parameter as nested lists (−∞ as null), the token labels, the
        settings and the steps' texts."""
        return _plugin("files").to_json(self, tokens_q, tokens_k)

    def _check_head(self, head) -> int:
        return whole_number(head, "head", low=0, high=self.num_heads - 1)


# ---- the steps: which there are, in the order a learner meets them ----------------------------

def facts_of(t: AttentionTrace) -> StepFacts:
    return StepFacts(
        projected=t.x is not None, cross=t.context is not None, has_output=t.params is not None,
        biased=t.params is not None and t.params.has_bias, kv_group=t.kv_group,
        num_kv_heads=t.num_kv_heads, scale=float(t.scale), d_k=t.d_k, rope_base=t.rope_base,
        mask=None if not t.has_mask else ("bool" if t.mask is not None else "float"),
        weights_given=t.weights_given, design=t.design)


def steps_of(t: AttentionTrace) -> list[Step]:
    """The steps in the order a learner meets them. Which steps there are follows the trace: X
    when it was projected (not Q, K, V entered), a context for cross-attention, the rotations
    with rotary positions, the masked scores with a mask, the output step when it has W_O; a
    real decoder layer's designs where it has them (the scaled embeddings first, QK-norm, the
    norm after attention last)."""
    facts = facts_of(t)

    def step(name, array, axes, compute=None):
        return Step(name, array, axes, facts, compute)

    s = []
    if t.embedded is not None:
        s.append(step("embedded", t.embedded, ("query", "feature")))
    if facts.projected:
        s.append(step("x", t.x, ("query", "feature")))
        if facts.cross:
            s.append(step("context", t.context, ("key", "feature")))
    s += [step("q", t.q, ("head", "query", "feature")), step("k", t.k, ("head", "key", "feature")),
          step("v", t.v, ("head", "key", "feature"))]
    if t.q_normed is not None:
        s += [step("q_normed", t.q_normed, ("head", "query", "feature")),
              step("k_normed", t.k_normed, ("head", "key", "feature"))]
    if t.rope_base is not None:
        s += [step("q_rotated", t.q_rotated, ("head", "query", "feature")),
              step("k_rotated", t.k_rotated, ("head", "key", "feature"))]
    s += [step("scores", t.scores, ("head", "query", "key")),
          step("scaled_scores", t.scaled_scores, ("head", "query", "key"))]
    if t.has_mask:
        s.append(step("masked_scores", t.masked_scores, ("head", "query", "key")))
    s += [step("weights", t.weights, ("head", "query", "key")),
          step("weighted_values", None, ("head", "query", "key", "feature"),
               compute=_WeightedValues(t.weights, t.v)),
          step("z", t.z, ("head", "query", "feature")),
          step("concat", t.concat, ("query", "feature"))]
    if facts.has_output:
        s.append(step("output", t.output, ("query", "feature")))
    if t.output_normed is not None:
        s.append(step("output_normed", t.output_normed, ("query", "feature")))
    return s


@dataclass(frozen=True, eq=False)
class _WeightedValues:
    """A_h[i, j] v_j for every head, query and key: (H, n_q, n_k, d_v), made when called. Holds
    the two arrays, not the trace, so a trace is freed as soon as it is dropped (a closure over
    the trace would be a cycle that only the garbage collector breaks, minutes later)."""

    weights: np.ndarray               # (H, n_q, n_k)
    v: np.ndarray                     # (H, n_k, d_v)

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.weights.shape, self.v.shape[-1])              # (H, n_q, n_k, d_v)

    def __call__(self) -> np.ndarray:
        return self.weights[..., None] * self.v[:, None]
