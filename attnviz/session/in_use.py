"""What the computation will use, for the sidebar to show: `in_use(settings, toy)` gives the
sizes, the scaling, the mask, the K/V heads and the rotary positions a view will be built with,
and why a setting of the user's does not apply in this mode. Cheap (no trace), no streamlit."""

from __future__ import annotations

from dataclasses import dataclass, replace

from attnviz.core.errors import AttnvizInputError
from attnviz.core.inputs import MAX_D_MODEL
from attnviz.core.matrix_text import parse_matrix
from attnviz.core.modes import Mode
from attnviz.i18n import Message
from attnviz.models.trainer.toy_tasks import task_name
from attnviz.session.settings import TOY_MODE, Settings, ToyChoice
from attnviz.tutorials.presets import Preset, load_preset


@dataclass(frozen=True)
class InUse:
    """The sizes and scaling the computation uses, for the sidebar to show. A `*_fixed` text
    says why the user's own setting does not apply in this mode (None: the setting applies).
    A size is None where the input does not have it (no X: no d_model) or cannot be read.
    The reasons are Messages, shown (str) in the page's language."""

    d_model: int | None
    num_heads: int | None
    d_k: int | None
    scaled: bool
    d_model_fixed: Message | None = None
    heads_fixed: Message | None = None
    scale_fixed: Message | None = None
    causal: bool | None = None        # the mask the mode fixes (None: the user's setting)
    causal_fixed: Message | None = None
    # grouped-query K/V heads and rotary positions: the value in use (None: the user's
    # setting) and why it is fixed (None: the user's setting applies)
    kv_heads: int | None = None
    kv_fixed: Message | None = None
    rope: bool | None = None
    rope_base: int | None = None
    rope_fixed: Message | None = None


def in_use(s: Settings, toy: ToyChoice | None = None) -> InUse:
    """What `build_view(s, toy=toy)` will use for d_model, heads, d_k, scaling, the mask,
    K/V heads and rotary positions; cheap (no trace)."""
    use = _sizes_in_use(s, toy)
    if s.mode == Mode.PRETRAINED:
        return use
    odd = None if use.d_k is None or use.d_k % 2 == 0 else replace(
        use, rope=False, rope_fixed=Message("in_use.rope.odd_d_k", d_k=use.d_k))
    if s.mode in (Mode.SENTENCE, Mode.MATRIX_X):
        return odd or use
    if s.mode == Mode.PRESET:
        p = load_preset(s.preset)
        why = Message("in_use.preset.kv_heads", tutorial=p.tutorial)
        if p.weights is None:
            return replace(use, kv_heads=1, kv_fixed=why, rope=False,
                           rope_fixed=Message("in_use.preset.rope_given", tutorial=p.tutorial))
        return replace(odd or use, kv_heads=p.weights.num_kv_heads, kv_fixed=why)
    why = Message("in_use.qkv.kv_rope") if s.mode == Mode.QKV else Message("in_use.toy.kv_rope")
    # one K/V head per head (the toy's torch MultiheadAttention; typed Q, K, V: one head)
    return replace(use, kv_heads=use.kv_heads or use.num_heads, kv_fixed=why, rope=False,
                   rope_fixed=why)


def _sizes_in_use(s: Settings, toy: ToyChoice | None = None) -> InUse:
    if s.mode == TOY_MODE:
        return _toy_in_use(toy)
    if s.mode == Mode.PRESET:
        return _preset_in_use(load_preset(s.preset))
    if s.mode == Mode.QKV:
        width = _columns(s.q_text)
        return InUse(None, 1, width, s.scaled, d_model_fixed=Message("in_use.qkv.d_model"),
                     heads_fixed=Message("in_use.qkv.heads"))
    if s.mode == Mode.PRETRAINED:
        return _pretrained_in_use(s)
    d_model = _columns(s.x_text) if s.mode == Mode.MATRIX_X else s.d_model
    d_k = s.d_k or (d_model // s.num_heads if d_model and s.num_heads
                    and d_model % s.num_heads == 0 else None)
    return InUse(d_model, s.num_heads, d_k, s.scaled,
                 d_model_fixed=Message("in_use.matrix_x.d_model")
                 if s.mode == Mode.MATRIX_X else None)


def _pretrained_in_use(s: Settings) -> InUse:
    """The pretrained model's own sizes and options. A causal model's are all fixed (its
    sizes, its mask, its K/V heads, its rotary base); an encoder's layer takes the user's
    scaling and mask (build_view recomputes it) and has neither K/V heads nor rotations."""
    entry = s.model_entry
    own = Message("in_use.pretrained", model=entry.shown)
    if not entry.causal:
        return InUse(None, None, None, s.scaled, d_model_fixed=own, heads_fixed=own,
                     kv_fixed=own, rope=False, rope_fixed=own)
    fixed = dict(d_model_fixed=own, heads_fixed=own, scale_fixed=own, causal=True,
                 causal_fixed=Message("in_use.decoder.causal", model=entry.shown),
                 kv_fixed=own, rope_fixed=own)
    try:
        c = entry.sizes()                                 # the model not loaded
    except AttnvizInputError:                 # not installed: the page says so
        return InUse(None, None, None, True, **fixed)
    return InUse(c.d_model, c.num_heads, c.d_k, True, kv_heads=c.num_kv_heads,
                 rope=c.rope_base is not None,
                 rope_base=None if c.rope_base is None else int(c.rope_base), **fixed)


def _preset_in_use(p: Preset) -> InUse:
    if p.weights is not None:
        d_model, heads, d_k = p.weights.d_model, p.weights.num_heads, p.weights.d_k
    else:
        q = p.q if p.q is not None else p.x
        d_model, heads, d_k = (None if p.q is not None else p.x.shape[1]), 1, q.shape[1]
    scaled = p.scale is None
    why = Message("in_use.preset", tutorial=p.tutorial)
    return InUse(d_model, heads, d_k, scaled, d_model_fixed=why, heads_fixed=why,
                 scale_fixed=Message("in_use.preset.scaled" if scaled else
                                     "in_use.preset.not_scaled", tutorial=p.tutorial))


def _toy_in_use(toy: ToyChoice | None) -> InUse:
    scaling = Message("in_use.toy.scaled")
    if toy is None:
        no_run = Message("sidebar.toy.no_run")
        return InUse(None, None, None, True, d_model_fixed=no_run, heads_fixed=no_run,
                     scale_fixed=scaling, causal=False, causal_fixed=no_run)
    cfg = toy.run.config
    why = Message("in_use.toy.sizes", task=task_name(cfg.task))
    return InUse(cfg.d_model, cfg.heads, cfg.d_model // cfg.heads, True, d_model_fixed=why,
                 heads_fixed=why, scale_fixed=scaling, causal=cfg.causal,
                 causal_fixed=Message("in_use.toy.causal" if cfg.causal else
                                      "in_use.toy.not_causal", task=task_name(cfg.task)))


def _columns(text: str) -> int | None:
    """The width of a typed matrix, read off its first row (JSON: the whole text); None when
    it does not parse (the page then says why)."""
    stripped = text.strip()
    first = stripped if stripped.startswith("[") else next(
        (line for line in stripped.splitlines() if line.strip()), "")
    try:
        return parse_matrix(first, max_cols=MAX_D_MODEL).shape[1]
    except AttnvizInputError:
        return None
