"""From the app's settings to a trace: `build_view` turns a `Settings` (plus the user's edited
matrices and, in the Toy model mode, the trained run) into a `View`: the trace, the token labels
for rows and columns, and notices. Bad input never raises out of `build_view`: it comes back as
`View.error`, the error's `Message` (its id and numbers), rendered by the page that shows it.
No streamlit: tested alone."""

from __future__ import annotations

import numpy as np

from attnviz.core.engine import trace_attention, trace_qkv, with_weights
from attnviz.core.errors import AttnvizInputError
from attnviz.core.inputs import (MAX_D_MODEL, MAX_HEADS, MAX_TOKENS, embed_tokens,
                                 sinusoidal_positions, tokenize, truncate)
from attnviz.core.matrix_text import parse_matrix_with_notes
from attnviz.core.modes import Mode
from attnviz.core.weights import MultiHeadWeights
from attnviz.i18n import Message, t
from attnviz.models.trainer.toy_tasks import task_name
from attnviz.session.edits import Edit
from attnviz.session.in_use import in_use
from attnviz.session.overflow import trace_edited
from attnviz.session.settings import (TOY_MODE, Settings, ToyChoice, check_layer, rope_base_of,
                                      weights_signature)
from attnviz.session.view import View
from attnviz.tutorials.presets import load_preset


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
    view.trace = trace_edited(view, lambda x_, w_: trace_attention(
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
    from attnviz.session.encoder_runs import cached_encoder_run

    s = view.settings
    run = cached_encoder_run(s.sentence, s.max_tokens, s.model_entry.load())
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
    view.trace = trace_edited(view, lambda x_, w_: trace_attention(
        x_, w_, causal=s.causal, scale=s.scale), (layer.x, layer.params), (x, w)) \
        if edited or changed else layer
    if changed:
        view.notices.append(t("notice.pretrained.changed"))


def _build_decoder(view: View, edits: dict) -> None:
    """One layer of a causal model (`layer_steps.layer_trace`): its real input (the residual
    stream after RMSNorm), W_Q with its query heads, W_K and W_V with the K/V heads they share,
    W_O, the layer's rotary base, scale and mask (a sliding window where it has one), and what
    the model puts around attention (Gemma's scaled embeddings, QK-norm, the norm after
    attention). Edits apply to this layer's attention only (the layers after it are not
    recomputed); QK-norm keeps the model's gains."""
    from attnviz.models.decoders import layer_steps
    from attnviz.session.decoder_runs import cached_decoder_run

    s = view.settings
    model = s.model_entry.load()
    run = cached_decoder_run(s.sentence, s.max_tokens, model)
    if run.truncated:
        view.notices.append(Message("decoder.truncated", total=run.total, shown=len(run.ids)))
    layer = layer_steps.layer_trace(model, run, s.layer)
    tokens = list(run.tokens)
    view.x = layer.x
    x, w = _apply_edits(view, layer.x, layer.params, tokens, edits)
    view.params = w
    view.tokens_q = view.tokens_k = tokens
    if x is layer.x and w is layer.params:
        view.trace = layer
        return
    view.trace = trace_edited(view, lambda x_, w_: layer_steps.edited_layer_trace(
        model, run, s.layer, x_, w_), (layer.x, layer.params), (x, w))


def _build_toy(view: View, edits: dict, toy: ToyChoice | None) -> None:
    """One layer of the toy model trained on the Train page, at checkpoint `toy.step`, on a
    held-out sequence: X is the model's own residual stream there (as `run.trace` has it).
    Edits apply to this layer's attention; `toy_answers` shows what they do to the answer."""
    from attnviz.models.trainer.toy_tasks import token_labels

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
    view.trace = trace_edited(view, lambda x_, w_: trace_attention(
        x_, w_, causal=run.config.causal), (layer_x, trained), (x, w))


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
