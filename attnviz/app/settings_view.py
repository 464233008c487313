"""From the app's settings to a trace: plain Python, no streamlit, so it is testable alone.

A `Settings` holds what the sidebar asks for; `build_view` turns it (plus the user's edited
matrices) into a `View`: the trace, the token labels for rows and columns, and notices. Bad
input never raises out of `build_view`: it comes back as `View.error`, the error's `Message`
(its id and numbers), rendered by the page that shows it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from attnviz.i18n import Message, t
from attnviz.core.modes import Mode
from attnviz.core.engine import AttentionTrace, trace_attention, trace_qkv, with_weights
from attnviz.io import files
from attnviz.app.edits import CATALOGUE, Edit, make_edit, shown_name
from attnviz.core.errors import AttnvizInputError, OverflowInStep
from attnviz.core.inputs import (DEFAULT_MAX_TOKENS, MAX_D_MODEL, MAX_HEADS, MAX_TOKENS,
                                 cell_name, embed_tokens, parse_matrix, parse_matrix_with_notes,
                                 sinusoidal_positions, tokenize, truncate)
from attnviz.describe.labels import matrix_labels, unique
from attnviz.tutorials.presets import PRESET_NAMES, Preset, load_preset
from attnviz.core.weights import INIT_SCHEMES, PARAMETERS, MultiHeadWeights
from attnviz.models import registry
from attnviz.models.toy_tasks import task_name

if TYPE_CHECKING:                     # a ToyRun exists only once torch is loaded
    from attnviz.models.toy import ToyRun

TOY_MODE = Mode.TOY.value
MODES = tuple(m.value for m in Mode)    # the values a widget, a link and a file carry
NO_TOY_RUN = "error.toy.no_run"     # the error's id: View.error.msg_id when no run is chosen
DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired"
MAX_SEED = 2**31 - 1
ROPE_BASES = (10000, 100000)          # the rotary bases offered (Llama 2: 10⁴, SmolLM2: 10⁵)

# the allowed range of each whole-number setting (the sidebar's and a link's bounds); the
# layer's follows the registered models: bounds("layer")
BOUNDS = {"d_model": (1, MAX_D_MODEL), "num_heads": (1, MAX_HEADS), "d_k": (0, MAX_D_MODEL),
          "seed": (0, MAX_SEED), "max_tokens": (1, MAX_TOKENS),
          "kv_heads": (0, MAX_HEADS), "rope_base": (min(ROPE_BASES), max(ROPE_BASES))}


def bounds(name: str) -> tuple[int, int] | None:
    """The allowed range of whole-number setting `name` (None: not one). The layer's: up to
    the last layer of the registered model with the most (each model's own: layer_bounds)."""
    if name == "layer":
        return 0, max((n for n in map(_layers_or_none, registry.ENTRIES) if n), default=1) - 1
    return BOUNDS.get(name)


def _layers_or_none(entry: registry.ModelEntry) -> int | None:
    try:
        return entry.num_layers
    except AttnvizInputError:            # not installed: its pages say so
        return None


def layer_bounds(model: str) -> tuple[int, int] | None:
    """The layers of pretrained model `model` (one of registry.NAMES): 0 … its layers − 1,
    read from its config; None when that cannot be read (the model is not installed: the
    page that runs it says so)."""
    layers = _layers_or_none(registry.get(model))
    return None if layers is None else (0, layers - 1)


def check_layer(s: "Settings") -> None:
    """AttnvizInputError unless `s.layer` is a layer of `s.model` (the model's own error when
    its config cannot be read)."""
    entry = s.model_entry
    high = entry.num_layers - 1
    if not 0 <= s.layer <= high:
        raise AttnvizInputError("error.settings.layer_for_model", low=0, high=high,
                                model=entry.shown, layer=s.layer)


def kv_head_counts(heads: int) -> list[int]:
    """The numbers of key/value heads `heads` query heads can share: its divisors."""
    return [d for d in range(1, heads + 1) if heads % d == 0] if heads >= 1 else []


def rope_base_of(s: "Settings") -> float | None:
    """The rotary base the synthetic inputs rotate Q and K with (None: rotary positions off)."""
    return float(s.rope_base) if s.rope else None


@dataclass(frozen=True)
class Settings:
    """What the sidebar asks for. Defaults give a newcomer heatmaps at once."""

    mode: str = Mode.SENTENCE.value
    sentence: str = DEFAULT_SENTENCE
    preset: str = "three_inputs"
    d_model: int = 16
    num_heads: int = 4
    d_k: int = 0                      # 0 = d_model // num_heads
    init: str = "xavier"
    seed: int = 0
    bias: bool = False
    scaled: bool = True
    rounded: bool = False             # tutorial 003's rounded weights instead of the softmax
    causal: bool = False
    positional: bool = False
    max_tokens: int = DEFAULT_MAX_TOKENS
    layer: int = 0                    # the pretrained or toy model's layer the pages show
    x_text: str = "1, 0, 1, 0\n0, 2, 0, 2\n1, 1, 1, 1"
    q_text: str = "1, 0, 1\n0, 1, 1"
    k_text: str = "0, 0, 1\n0, 1, 1"
    v_text: str = "1, 2\n3, 4"
    model: str = registry.DEFAULT     # the pretrained model: one of registry.NAMES
    kv_heads: int = 0                 # key/value heads (grouped-query); 0 = as many as heads
    rope: bool = False                # rotary positions on Q and K (synthetic inputs)
    rope_base: int = 10000            # their base: one of ROPE_BASES

    @classmethod
    def from_mapping(cls, values) -> "Settings":
        """Settings from a mapping such as st.session_state; absent or unusable values fall back
        to the defaults (a page must work from seeded state alone)."""
        base = cls()
        picked = {}
        for name, default in base.__dict__.items():
            if name not in values:
                continue
            value = values[name]
            if isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, int):
                ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            else:
                ok = isinstance(value, str)
            if ok:
                picked[name] = value
        s = replace(base, **picked)
        if s.mode not in MODES:
            s = replace(s, mode=base.mode)
        if s.preset not in PRESET_NAMES:
            s = replace(s, preset=base.preset)
        if s.init not in INIT_SCHEMES:
            s = replace(s, init=base.init)
        if s.model not in registry.NAMES:
            s = replace(s, model=base.model)
        if s.rope_base not in ROPE_BASES:
            s = replace(s, rope_base=base.rope_base)
        return s

    @property
    def scale(self) -> float | None:
        return None if self.scaled else 1.0

    @property
    def model_entry(self) -> registry.ModelEntry:
        """The pretrained model's entry: what pages ask of it (causal, its views, sizes)."""
        return registry.get(self.model)

    def to_dict(self) -> dict:
        """Every setting by name (str, int or bool values): what an exported file carries so
        that `view_from_file` rebuilds the view."""
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, values) -> "Settings":
        """The inverse of `to_dict`, strict (for files): a setting this attnviz does not have,
        a value of the wrong type, or an unknown mode, preset or initialisation is an
        AttnvizInputError naming it; a setting the file lacks (an older file) keeps its
        default."""
        if not isinstance(values, dict):
            raise AttnvizInputError("error.settings.not_a_mapping")
        known = cls().__dict__
        unknown = sorted(str(n)[:40] for n in values if n not in known)
        if unknown:
            raise AttnvizInputError("error.settings.unknown", count=len(unknown),
                                    names=", ".join(unknown))
        for name, value in values.items():
            if type(value) is not type(known[name]):       # bool is not an int here
                raise AttnvizInputError("error.settings.type", name=name,
                                        type=type(known[name]).__name__,
                                        value=repr(str(value)[:40]))
            low, high = bounds(name) or (value, value)
            if not low <= value <= high:
                raise AttnvizInputError("error.settings.range", name=name, low=low, high=high,
                                        value=value)
        for name, allowed in (("mode", MODES), ("preset", PRESET_NAMES),
                              ("init", INIT_SCHEMES), ("model", registry.NAMES),
                              ("rope_base", ROPE_BASES)):
            if name in values and values[name] not in allowed:
                raise AttnvizInputError("error.settings.value", name=name,
                                        value=repr(str(values[name])[:40]))
        s = replace(cls(), **values)
        if layer_bounds(s.model) is not None:      # a model not installed: its page says so
            check_layer(s)
        return s


@dataclass(frozen=True, eq=False)
class ToyChoice:
    """The Train page's run as the pages show it: not a setting (a trained run cannot travel in
    a link), so the app hands it to `build_view` beside the settings."""

    run: "ToyRun"
    step: int                         # a checkpoint step of the run
    example: int                      # index into run.test_inputs

    @property
    def sequence(self) -> np.ndarray:
        """(n,) the held-out sequence shown."""
        return self.run.test_inputs[self.example]

    @property
    def run_id(self) -> str:
        """Names the run's weights: its configuration (seed included: training is
        deterministic) and the steps it did (a stopped run did fewer)."""
        text = repr((self.run.config, self.run.steps))
        return hashlib.blake2s(text.encode(), digest_size=6).hexdigest()


@dataclass
class View:
    """What every page draws: a trace and its labels, or an error (a Message, rendered where
    shown)."""

    settings: Settings
    trace: AttentionTrace | None = None
    tokens_q: list[str] = field(default_factory=list)
    tokens_k: list[str] = field(default_factory=list)
    params: MultiHeadWeights | None = None      # None when Q, K, V were entered directly
    x: np.ndarray | None = None                 # (n, d_model) before edits, None for Q, K, V
    x_in: np.ndarray | None = None              # (n, d_model) with edits: the trace's input
    preset: Preset | None = None
    signature: str = ""                         # which generated matrices the edits belong to
    toy: ToyChoice | None = None                # the trained toy run shown (Toy model mode)
    notices: list[str] = field(default_factory=list)
    error: Message | None = None
    blamed_cells: tuple["Blame", ...] = ()      # the edited cells the error comes from

    @property
    def ok(self) -> bool:
        return self.trace is not None


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
    return replace(use, kv_fixed=why, rope=False, rope_fixed=why)


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


def weights_signature(s: Settings, toy: ToyChoice | None = None) -> str:
    """Edits are kept per configuration: returning to it brings them back."""
    if s.mode == TOY_MODE:
        return f"toy:{toy.run_id}:{s.layer}:{toy.step}" if toy is not None else "toy:none"
    if s.mode == Mode.PRESET:
        return f"preset:{s.preset}"
    if s.mode == Mode.PRETRAINED:
        return f"pretrained:{s.model}:{s.layer}"
    grouped = f":kv{s.kv_heads}" if s.kv_heads not in (0, s.num_heads) else ""  # other shapes
    if s.mode == Mode.MATRIX_X:
        return f"matrix:{s.num_heads}:{s.d_k}:{s.init}:{s.seed}:{s.bias}{grouped}"
    return f"random:{s.d_model}:{s.num_heads}:{s.d_k}:{s.init}:{s.seed}:{s.bias}{grouped}"


def build_view(s: Settings, edits: dict | None = None, toy: ToyChoice | None = None) -> View:
    """The trace for settings `s` with the user's edited matrices `edits` (name → array) applied;
    in the Toy model mode, of the trained run `toy`. Never raises for bad input: the problem
    comes back in `View.error`."""
    view = View(settings=s, signature=weights_signature(s, toy))
    try:
        if s.mode == TOY_MODE:
            _build_toy(view, edits or {}, toy)
        elif s.mode == Mode.QKV:
            _build_qkv(view)
        elif s.mode == Mode.PRETRAINED:
            _build_pretrained(view, edits or {})
        else:
            _build_projected(view, edits or {})
    except AttnvizInputError as exc:
        if exc.message is None:      # a sentence, not an id: attnviz raises none (test_i18n)
            raise
        view.trace, view.error = None, exc.message
    return view


def _build_qkv(view: View) -> None:
    s = view.settings
    arrays = {}
    for name in ("q", "k", "v"):
        arrays[name], notes = parse_matrix_with_notes(
            getattr(s, f"{name}_text"), max_rows=MAX_TOKENS, max_cols=MAX_D_MODEL,
            name=name.upper())
        view.notices += [t("notice.matrix_note", name=name.upper(), note=note)
                         for note in notes]
    view.trace = trace_qkv(arrays["q"], arrays["k"], arrays["v"], causal=s.causal,
                           scale=s.scale)
    view.tokens_q = [f"q{i + 1}" for i in range(view.trace.n_q)]
    view.tokens_k = [f"k{i + 1}" for i in range(view.trace.n_k)]


def _build_projected(view: View, edits: dict) -> None:
    s = view.settings
    if s.mode == Mode.PRESET:
        preset = load_preset(s.preset)
        view.preset = preset
        if preset.weights is None:   # Q, K, V or raw X given directly: nothing to project
            view.trace = preset.trace(causal=s.causal)
            view.tokens_q, view.tokens_k = list(preset.tokens), preset.key_tokens
            view.x = preset.x
            return
        tokens, x, w, scale = list(preset.tokens), preset.x, preset.weights, preset.scale
    else:
        tokens, x = _tokens_and_x(view)
        w = _random_weights(s, d_model=x.shape[1])
        scale = s.scale
    view.x = x
    x_edited, w_edited = _apply_edits(view, x, w, tokens, edits)
    view.params = w_edited
    view.tokens_q = view.tokens_k = tokens
    rope = None if in_use(s).rope_fixed else rope_base_of(s)    # odd d_k: never rotated
    view.trace = _trace_edited(view, lambda x_, w_: trace_attention(
        x_, w_, causal=s.causal, scale=scale, rope=rope), (x, w), (x_edited, w_edited))
    if view.preset is not None:
        _article_weights(view)


def _article_weights(view: View) -> None:
    """Where the tutorial prints numbers from rounded weights, say so; with `rounded` on, use
    its weights, so every later step shows the tutorial's numbers."""
    note = view.preset.side_notes.get("rounded_weights")
    if note is None:
        return
    text, rounded = note
    if not view.settings.rounded:
        view.notices.append(t("notice.rounded.tick", text=text))
        return
    if rounded.shape != view.trace.weights.shape[1:] or view.settings.causal \
            or view.settings.rope:
        view.notices.append(t("notice.rounded.not_here"))
        return
    view.trace = with_weights(view.trace, rounded, why=Message("step.weights.rounded_why"))
    view.notices.append(t("notice.rounded.used"))


def _build_pretrained(view: View, edits: dict) -> None:
    """One layer of the chosen pretrained model; a causal one's is built by _build_decoder."""
    check_layer(view.settings)
    if view.settings.model_entry.causal:
        return _build_decoder(view, edits)
    return _build_encoder(view, edits)


def _build_encoder(view: View, edits: dict) -> None:
    """One layer of an encoder (all-MiniLM-L6-v2): its real input hidden states and real
    weights. Edits apply to this layer's attention only (the layers after it are not
    recomputed); so do the user's scaling and mask."""
    from attnviz.models.pretrained import cached_run

    s = view.settings
    run = cached_run(s.sentence, s.max_tokens, s.model_entry.load())
    if run.notice:
        view.notices.append(run.notice)
    layer = run.traces[s.layer]
    tokens = list(run.tokens)
    view.x = layer.x
    x, w = _apply_edits(view, layer.x, layer.params, tokens, edits)
    view.params = w
    view.tokens_q = view.tokens_k = tokens
    edited = x is not layer.x or w is not layer.params
    changed = s.causal or not s.scaled
    view.trace = _trace_edited(view, lambda x_, w_: trace_attention(
        x_, w_, causal=s.causal, scale=s.scale), (layer.x, layer.params), (x, w)) \
        if edited or changed else layer
    if changed:
        view.notices.append(t("notice.pretrained.changed"))


def _build_decoder(view: View, edits: dict) -> None:
    """One layer of a causal model (SmolLM2-135M-Instruct, `run.trace(layer)`): its real
    input (the residual stream after RMSNorm), W_Q with 9 query heads, W_K and W_V with the 3
    K/V heads they share, W_O, rotary positions (base 100000) and the causal mask. Edits
    apply to this layer's attention only (the layers after it are not recomputed)."""
    from attnviz.app.decoder_runs import cached_decoder_run

    s = view.settings
    run = cached_decoder_run(s.sentence, s.max_tokens, s.model_entry.load())
    if run.truncated:
        view.notices.append(Message("decoder.truncated", total=run.total, shown=len(run.ids)))
    layer = run.trace(s.layer)
    tokens = list(run.tokens)
    view.x = layer.x
    x, w = _apply_edits(view, layer.x, layer.params, tokens, edits)
    view.params = w
    view.tokens_q = view.tokens_k = tokens
    if x is layer.x and w is layer.params:
        view.trace = layer
        return
    view.trace = _trace_edited(view, lambda x_, w_: trace_attention(
        x_, w_, causal=True, rope=layer.rope_base), (layer.x, layer.params), (x, w))


def _build_toy(view: View, edits: dict, toy: ToyChoice | None) -> None:
    """One layer of the toy model trained on the Train page, at checkpoint `toy.step`, on a
    held-out sequence: X is the model's own residual stream there (as `run.trace` has it).
    Edits apply to this layer's attention; `toy_answers` shows what they do to the answer."""
    from attnviz.models.toy_tasks import token_labels

    if toy is None:
        raise AttnvizInputError("error.toy.no_run")                 # NO_TOY_RUN
    run, layers = toy.run, toy.run.config.layers
    if not 0 <= view.settings.layer < layers:
        raise AttnvizInputError("error.toy.layer", count=layers, high=layers - 1,
                                value=view.settings.layer)
    view.toy = toy
    layer = view.settings.layer
    view.notices.append(t("notice.toy.layer_later" if layer else "notice.toy.layer_first",
                          layer=layer, task=task_name(run.config.task), step=toy.step))
    sequence = toy.sequence
    tokens = token_labels(sequence)
    layer_x = run.residual_stream(sequence, toy.step)[view.settings.layer]    # (n, d_model)
    view.x = layer_x
    trained = run.params(view.settings.layer, toy.step)
    x, w = _apply_edits(view, layer_x, trained, tokens, edits)
    view.params = w
    view.tokens_q = view.tokens_k = tokens
    view.trace = _trace_edited(view, lambda x_, w_: trace_attention(
        x_, w_, causal=run.config.causal), (layer_x, trained), (x, w))


@dataclass(frozen=True)
class ToyAnswers:
    """The toy model's answer on the shown sequence, with the trained weights and with the
    user's edits of the shown layer (each (n,) token ids)."""

    sequence: np.ndarray
    target: np.ndarray                # NO_TARGET (−1) where nothing is scored
    trained: np.ndarray
    edited: np.ndarray
    x_edited: bool                    # X was edited: the answer cannot follow (see below)

    @property
    def changed(self) -> np.ndarray:
        """(n,) bool: where the edits change the answer."""
        return self.trained != self.edited


def toy_answers(view: View) -> ToyAnswers | None:
    """The model's answers for a Toy model view (None for any other view): the whole model
    run with the view's layer weights (edits included) against its trained weights. An edit
    of X changes only the layer's trace: the answer reads the model's own stream."""
    if view.toy is None or view.params is None:
        return None
    run, step, sequence = view.toy.run, view.toy.step, view.toy.sequence
    trained = run.predict(sequence, step=step)
    own = run.params(view.settings.layer, step)
    same = all(np.array_equal(getattr(view.params, n), getattr(own, n)) for n in PARAMETERS)
    edited = trained if same else run.predict(sequence, step=step,
                                              params={view.settings.layer: view.params})
    return ToyAnswers(sequence, run.targets(sequence), trained, edited,
                      x_edited=not np.array_equal(view.trace.x, view.x))


def _tokens_and_x(view: View) -> tuple[list[str], np.ndarray]:
    s = view.settings
    if s.mode == Mode.MATRIX_X:
        x, notes = parse_matrix_with_notes(s.x_text, max_rows=MAX_TOKENS,
                                           max_cols=MAX_D_MODEL, name="X")
        view.notices += [t("notice.matrix_note", name="X", note=note) for note in notes]
        tokens = [f"x{i + 1}" for i in range(len(x))]
    else:
        tokens, notice = truncate(tokenize(s.sentence), s.max_tokens)
        if notice:
            view.notices.append(str(notice))
        _check_d_model(s.d_model)
        x = embed_tokens(tokens, s.d_model, seed=s.seed)
    if s.positional:
        x = x + sinusoidal_positions(len(x), x.shape[1])
    return tokens, x


def _check_d_model(d_model: int) -> None:
    if not 1 <= d_model <= MAX_D_MODEL:
        raise AttnvizInputError("error.settings.d_model", high=MAX_D_MODEL, value=d_model)


def _random_weights(s: Settings, d_model: int) -> MultiHeadWeights:
    _check_d_model(d_model)
    if not 1 <= s.num_heads <= MAX_HEADS:
        raise AttnvizInputError("error.settings.heads", high=MAX_HEADS, value=s.num_heads)
    d_k = s.d_k or None
    if d_k is None and d_model % s.num_heads:
        raise AttnvizInputError("error.settings.head_dim", d_model=d_model, heads=s.num_heads)
    kv = s.kv_heads or None
    if kv is not None and (kv < 1 or s.num_heads % kv):
        raise AttnvizInputError("error.kv_heads.not_dividing", kv_heads=kv, heads=s.num_heads)
    return MultiHeadWeights.random(d_model, s.num_heads, d_k=d_k, d_v=d_k, init=s.init,
                                   seed=s.seed, bias=s.bias,
                                   num_kv_heads=None if kv == s.num_heads else kv)


def _apply_edits(view: View, x: np.ndarray, w: MultiHeadWeights, tokens: list[str],
                 edits: dict[str, Edit]) -> tuple[np.ndarray, MultiHeadWeights]:
    """X and the parameters with the user's edits applied. An edit that no longer fits (an X
    made for other tokens, or shapes that changed) is kept but not used, with a notice."""
    usable = {n: e.array for n, e in edits.items() if e.applies_to(tokens)}
    new_x = usable.pop("x", x)
    if new_x.shape != x.shape:
        view.notices.append(t("notice.edits.x_unused", rows=new_x.shape[0],
                              cols=new_x.shape[1], now_rows=x.shape[0], now_cols=x.shape[1]))
        new_x = x
    view.x_in = new_x
    if not usable:
        return new_x, w
    try:
        return new_x, w.replace(**usable)
    except AttnvizInputError as exc:
        view.notices.append(t("notice.edits.weights_unused", problem=str(exc)))
        return new_x, w


def current_matrices(view: View) -> dict[str, np.ndarray]:
    """Every editable matrix of the view as it is now (edits included), by catalogue name;
    empty when the input has no parameters (Q, K, V entered directly). Also when the trace
    cannot be computed from them (an edited cell overflows a step): they can be fixed."""
    if view.params is None or view.x_in is None:
        return {}
    found = {"x": view.x_in, **{n: getattr(view.params, n) for n in PARAMETERS}}
    return {n: a for n, a in found.items() if a is not None}


# ---- a view in a file, and back ------------------------------------------------------------------

def view_to_npz(view: View, file) -> None:
    """The view's trace as .npz (``attnviz.io.files.to_npz``) with its token labels and its
    settings (key ``settings``: JSON text), to a path or binary file object."""
    files.to_npz(view.trace, file, view.tokens_q, view.tokens_k,
                 settings=view.settings.to_dict())


def view_to_json(view: View) -> str:
    """The view's trace as JSON (``attnviz.io.files.to_json``) with its token labels and its
    settings (under ``"settings"``)."""
    return files.to_json(view.trace, view.tokens_q, view.tokens_k,
                         settings=view.settings.to_dict())


def view_from_file(file) -> View:
    """The view a .npz or JSON export was made from, rebuilt from the file alone: its settings
    make the input and the weights, and its X and parameters, where they differ from what the
    settings make, are the user's edits. `file`: a path, bytes, JSON text or a binary file
    object. AttnvizInputError when the file has no settings (a trace saved from Python) or is
    from the Toy model input (its trained run lives in the session, not in a file)."""
    return build_view(*recipe_from_file(file))


def recipe_from_file(file) -> tuple[Settings, dict[str, Edit], None]:
    """What `view_from_file` hands to `build_view`: (settings, edits, no toy run)."""
    settings_values, arrays = files.read_export(file)
    if settings_values is None:
        raise AttnvizInputError("error.file.no_settings")
    s = Settings.from_dict(settings_values)
    if s.mode == TOY_MODE:
        raise AttnvizInputError("error.file.toy_view")
    base = build_view(s)
    if base.error:
        raise AttnvizInputError("error.file.no_view", error=base.error)
    edits = {}
    for name, made in current_matrices(base).items():
        saved = arrays.get(name)
        if saved is not None and not np.array_equal(saved, made):
            edits[name] = make_edit(name, saved, base.tokens_q)
    return s, edits, None


# ---- an edit that makes a step overflow -------------------------------------------------------

@dataclass(frozen=True)
class Blame:
    """An edited cell that makes a step overflow, as the editor shows it."""

    name: str                 # the matrix, by catalogue name ("w_q")
    head: int | None          # its head, for a matrix with one slice per head
    text: str                 # "W_Q of head 0, row 1 (d0), column 1 (q0) = 1e308"


OVERFLOWING = ("q", "k", "v", "scores", "masked_scores", "z", "output")   # overflow.step.<name>
BLAME_TRIES = 16              # the largest edited cells tried, one by one, to find the cause


def _trace_edited(view: View, run, unedited: tuple, edited: tuple) -> AttentionTrace:
    """`run(x, w)` on the edited X and parameters (`edited`, beside the `unedited` pair);
    when a step overflows because of edited cells, the error names them and the step (so the
    learner can find and fix them) and `view.blamed_cells` lists them."""
    try:
        return run(*edited)
    except OverflowInStep as exc:
        step = exc.step
        if edited[0] is unedited[0] and edited[1] is unedited[1]:
            raise
        cells = _overflowing_cells(view, run, unedited, edited)
        if not cells:
            raise
        view.blamed_cells = tuple(cells)
        raise AttnvizInputError(
            "error.overflow.edited", count=len(cells),
            cells=t("list.and").join(c.text for c in cells),
            step=Message(f"overflow.step.{step}") if step in OVERFLOWING else step) from None


def _overflowing_cells(view: View, run, unedited: tuple, edited: tuple) -> list[Blame]:
    """The fewest edited cells that, put alone into the unedited matrices, make `run` fail:
    edited cells are added largest first until it fails, then any not needed is dropped;
    empty when the BLAME_TRIES largest edited cells are not enough."""
    def arrays(x, w) -> dict:
        return {"x": x, **{n: getattr(w, n) for n in PARAMETERS if getattr(w, n) is not None}}

    old, new = arrays(*unedited), arrays(*edited)
    changed = []                                   # (|value|, name, index)
    for name, a in new.items():
        if name in old and old[name].shape == a.shape:
            for index in zip(*np.nonzero(a != old[name])):
                changed.append((abs(float(a[index])), name, tuple(int(i) for i in index)))
    changed.sort(key=lambda c: -c[0])

    def fails(cells: list) -> bool:
        trial = {name: np.array(a, dtype=np.float64) for name, a in old.items()}
        for _, name, index in cells:
            trial[name][index] = new[name][index]
        x = trial.pop("x")
        try:
            run(x, unedited[1].replace(**trial))
        except AttnvizInputError:
            return True
        return False

    for n in range(1, min(len(changed), BLAME_TRIES) + 1):
        if fails(changed[:n]):
            culprits = changed[:n]
            for c in list(culprits) if n > 1 else []:   # drop any that is not needed
                if fails([d for d in culprits if d is not c]):
                    culprits.remove(c)
            return [_blame(view, name, index, new[name][index]) for _, name, index in culprits]
    return []


def _blame(view: View, name: str, index: tuple, value: float) -> Blame:
    """The cell of `name` at `index` (in the full array), named as the editor shows it."""
    per_head = CATALOGUE[name].per_head
    head, where = (index[0], index[1:]) if per_head else (None, index)
    row, col = (0, where[0]) if len(where) == 1 else where
    w = view.params
    full = view.x_in if name == "x" else getattr(w, name)
    shape = np.atleast_2d(full[head] if per_head else full).shape
    rows, cols = matrix_labels(name, shape, view.tokens_q, w.num_heads, w.d_v)
    rows, cols = unique(rows), unique(cols)
    number = repr(float(value)).replace("e+", "e")
    where = cell_name(shown_name(name, head), row + 1, col + 1, rows[row], cols[col])
    return Blame(name, head, f"{where} = {number}")
