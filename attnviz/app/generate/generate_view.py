"""The Generate page's parts (the model itself comes from model_loading): the prompt, the
next-token bars, the generation kept in the session and its controls, and the views of one step
(its attention row in every head, the logit lens of the position choosing it, the attention
sink, the KV cache).

The generation lives under the non-widget key keys.GENERATE_RUN as {"recipe": (model, text,
chat, temperature, seed), "generation": Generation}; a "next token" or "generate N" continues it with
``DecoderModel.generate_more`` (the steps made are kept, not run again: one prefill rebuilds the
KV cache, the sampler's random stream goes on where it stopped), and a changed prompt,
temperature or seed starts over from the prompt with ``DecoderModel.generate``.
At most MAX_NEW_TOKENS new tokens (the session holds every step's rows, never the cache)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz.core.cache import SizedCache
from attnviz.core.errors import AttnvizInputError
from attnviz.describe.labels import token_shown
from attnviz.i18n import t
from attnviz.models.decoders.decoder import MAX_TOKENS, DecoderModel, Generation
from attnviz.plot import generate_figures, lens_figures
from attnviz.app import keys
from attnviz.app.reading import reading_view
from attnviz.app.shared import language, widgets
from attnviz.app.generate.generate_state import (DEFAULT_PROMPT, MAX_NEW_TOKENS, MAX_SEED,
                                                 SAMPLINGS, TEMPERATURES, current)
from attnviz.app.shared.text import (MAX_PROMPT_CHARS, at_limit, bound, code, literal, token_line,
                                     token_notation)



# The prompt is (text, chat): the text typed, read as text (typed control tokens are their
# characters), and with chat=True the model's chat template around it (only the template's own
# tokens are control tokens: DecoderModel.chat_ids).

LENS_TOP = 5                            # the tokens each row of a step's lens keeps (its hover)
# a step's lens, once for every learner: (the text before the new token, the token) → the lens
# of its last position, (rows, 1, d_model) streams ≈ 71 KB, and its top tokens as written
# generations made from a prompt in one press, for any link asking for the same (prompt,
# chat, temperature, seed, count): each step's attention rows, ≤ 40 × 30 × 9 × 553 floats
_MADE = SizedCache(max_bytes=32 * 2**20, max_entries=32,
                   size_of=lambda gen: sum(s.attentions.nbytes for s in gen.steps))
_STEP_LENSES = SizedCache(max_bytes=16 * 2**20, max_entries=128,
                          size_of=lambda found: found[0].residuals.nbytes)


# the next-token bars of a prompt, once for every learner: keys of at most MAX_PROMPT_CHARS
_NEXT = SizedCache(max_bytes=4 * 2**20, max_entries=64)
# a prompt's number of tokens, per model
_COUNTS = SizedCache(max_bytes=2**20, max_entries=256, size_of=lambda n: 32)
# a link's prompt of more tokens than this draws its next-token bars only when pressed: one
# forward pass over them costs ~1.8 s of server CPU at 512 tokens (~0.4 s at 128), and a link
# opened by a class costs at most 1 s each (issue 34)
LINK_BARS_TOKENS = 128
TOP_K = 10                              # the next-token bars' tokens


def model_key(m: DecoderModel) -> str:
    """What the page's caches are keyed by besides the prompt: the model's file."""
    return str(m.path)


def next_tokens(m: DecoderModel, text: str, chat: bool,
                k: int = TOP_K) -> list[tuple[str, float]]:
    """The model's k most likely next tokens after the prompt (numbers and tokens only: the
    same in every language)."""
    return _NEXT.get((model_key(m), text, chat, k), lambda: m.next_tokens(text, k=k, chat=chat))


def prompt_ids(m: DecoderModel, text: str, chat: bool):
    """Every id the model reads for the prompt (generate keeps the last MAX_TOKENS)."""
    return m.chat_ids(text) if chat else m.encode(text)


def token_count(m: DecoderModel, text: str, chat: bool) -> int:
    return _COUNTS.get((model_key(m), text, chat), lambda: len(prompt_ids(m, text, chat)))


def prompt(m: DecoderModel, chat_offered: bool) -> tuple[str, bool] | None:
    """The prompt box and, where the model has a chat template (`chat_offered`), the switch
    putting the prompt in it; the prompt the model reads, (text, chat) (None when the prompt is
    empty, which is said). A base model (Gemma 3 270M) reads the prompt as it is."""
    st.session_state.setdefault(keys.GEN_PROMPT,
                                language.default(keys.GEN_PROMPT, DEFAULT_PROMPT))
    st.session_state.setdefault(keys.GEN_CHAT, False)
    bound(keys.GEN_PROMPT, MAX_PROMPT_CHARS)
    # persist_state: the page's choices stay when the learner visits another page and returns
    typed = st.text_area(t("generate.prompt.label"), key=keys.GEN_PROMPT, persist_state="session",
                         height=80, max_chars=MAX_PROMPT_CHARS, help=t("generate.prompt.help"))
    typed = typed[:MAX_PROMPT_CHARS]     # Streamlit cut a longer one already (max_chars): and here
    at_limit(typed, MAX_PROMPT_CHARS)
    chat = chat_offered and st.toggle(t("generate.chat.label"), key=keys.GEN_CHAT,
                                      persist_state="session", help=t("generate.chat.help"))
    if not chat_offered:
        st.caption(t("generate.chat.none", model=m.model_name))
    if not typed.strip():
        st.info(t("generate.prompt.empty"))
        return None
    if chat:
        with st.expander(t("generate.chat.expander")):
            st.code(m.chat_prompt(typed), language=None, wrap_lines=True)
            st.caption(t("generate.chat.typed_text", start=code("<|im_start|>"),
                         end=code("<|im_end|>"), eot=code("<|endoftext|>")))
    n = token_count(m, typed, chat)
    if n > MAX_TOKENS:
        st.info(t("generate.prompt.cut", tokens=n, kept=MAX_TOKENS))
    return typed, chat


def prompt_tokens(m: DecoderModel, text: str, chat: bool) -> None:
    ids = prompt_ids(m, text, chat)[-MAX_TOKENS:]   # what generate reads: the last 512
    tokens, _, spans = m.labels(ids)                # readable pieces and split characters
    st.subheader(t("generate.tokens", count=len(tokens)))
    st.markdown(token_line(map(generate_figures.token_label, tokens)))
    _spans_note(spans)
    token_notation()


def _spans_note(spans) -> None:
    """Characters whose UTF-8 bytes lie in several tokens, said once each."""
    if spans:
        st.caption(t("generate.spans", count=len(spans), spans="; ".join(
            t("generate.span", char=code(s.text), first=s.first, last=s.last) for s in spans)))


def cannot_run(m: DecoderModel, exc: AttnvizInputError) -> None:
    """What the model could not compute (numbers that are not finite: error.model.not_finite,
    naming the layer and the new token), said in place of its charts; the page stops."""
    st.error(t("generate.error.run", model=m.model_name, error=literal(exc)))
    st.stop()


def next_token_bars(m: DecoderModel, text: str, chat: bool) -> None:
    st.subheader(t("generate.next.subheader"))
    if not _asked_for(m, text, chat):
        return
    try:
        top = next_tokens(m, text, chat)
    except AttnvizInputError as exc:
        cannot_run(m, exc)
    st.caption(t("generate.next.caption", total=sum(p for _, p in top)))
    widgets.chart(generate_figures.next_token_bars(top, title=t("figure.generate.next.title")),
                  key=keys.GEN_NEXT_BARS)


def _asked_for(m: DecoderModel, text: str, chat: bool) -> bool:
    """False while the prompt is a link's, longer than LINK_BARS_TOKENS and its bars not yet
    computed on this server: a button computes them (the prompt typed or pressed: True)."""
    if st.session_state.get(keys.GEN_LINK_PROMPT) != text \
            or _NEXT.peek((model_key(m), text, chat, TOP_K)):
        return True
    tokens = min(token_count(m, text, chat), MAX_TOKENS)
    if tokens <= LINK_BARS_TOKENS:
        return True
    button = t("generate.next.button")
    if st.button(button, key=keys.GEN_NEXT_SHOW):
        st.session_state.pop(keys.GEN_LINK_PROMPT, None)
        return True
    st.info(t("generate.next.press", tokens=tokens, button=button), icon=":material/link:")
    return False


def controls() -> tuple[float, int, bool]:
    """Greedy or sampled (temperature, seed); returns (temperature, seed, sampled)."""
    if st.session_state.get(keys.GEN_SAMPLING) not in SAMPLINGS:      # absent, or a link's
        st.session_state[keys.GEN_SAMPLING] = "greedy"
    st.session_state.setdefault(keys.GEN_TEMPERATURE, 0.8)
    st.session_state.setdefault(keys.GEN_SEED, 0)
    st.session_state.setdefault(keys.GEN_COUNT, 5)
    cols = st.columns([2, 2, 1])
    with cols[0]:
        how = st.radio(t("generate.sampling.label"), SAMPLINGS, key=keys.GEN_SAMPLING,
                       persist_state="session", horizontal=True,
                       format_func=lambda v: t(f"generate.sampling.option.{v}"),
                       help=t("generate.sampling.help"))
    sampled = how == "sample"
    with cols[1]:
        temperature = st.slider(t("generate.temperature.label"), *TEMPERATURES, step=0.1,
                                key=keys.GEN_TEMPERATURE, persist_state="session",
                                disabled=not sampled,
                                help=t("generate.temperature.help"))
    with cols[2]:
        seed = st.number_input(t("generate.seed.label"), min_value=0, max_value=MAX_SEED,
                               step=1, key=keys.GEN_SEED, persist_state="session",
                               disabled=not sampled,
                               help=t("generate.seed.help"))
    return (float(temperature) if sampled else 0.0), (int(seed) if sampled else 0), sampled


def from_link(m: DecoderModel, model: str, text: str, chat: bool, temperature: float,
              seed: int) -> Generation | None:
    """The generation a link asked for (its prompt, settings and number of tokens: one
    generation is reproducible from them) when one was made already on this server; else the
    link's count put in the "Generate N" box and said: a link never generates by itself."""
    count = st.session_state.pop(keys.GEN_FROM_LINK, 0)
    if not count:
        return None
    gen = _MADE.peek((model_key(m), text, chat, temperature, seed, count))
    if gen is not None:
        st.session_state[keys.GENERATE_RUN] = {
            "recipe": (model, text, chat, temperature, seed), "generation": gen}
        return gen
    st.session_state[keys.GEN_COUNT] = count
    st.session_state[keys.GEN_LINK_COUNT] = ((model, text, chat, temperature, seed), count)
    return None


def link_notice(model: str, text: str, chat: bool, temperature: float, seed: int) -> None:
    """What a link's generation needs: a press (said while the prompt and settings are the
    link's, until the page generates)."""
    recipe, count = st.session_state.get(keys.GEN_LINK_COUNT) or (None, 0)
    if count and recipe == (model, text, chat, temperature, seed):
        st.info(t("generate.link.press", n=count,
                  button=t("generate.button.many", n=count)), icon=":material/link:")


def buttons(m: DecoderModel, model: str, text: str, chat: bool, temperature: float, seed: int,
            gen: Generation | None) -> Generation | None:
    """Next token, Generate N, Start over; the generation after the click."""
    count = len(gen.steps) if gen else 0
    ended = gen is not None and gen.stopped == "eos"
    full = count >= MAX_NEW_TOKENS
    cols = st.columns([1, 1, 1, 1], vertical_alignment="bottom")
    with cols[0]:
        one = st.button(t("generate.button.next"), key=keys.GEN_NEXT, disabled=ended or full,
                        type="primary", width="stretch")
    with cols[1]:
        n = st.number_input(t("generate.count.label"), min_value=1, max_value=MAX_NEW_TOKENS,
                            step=1, key=keys.GEN_COUNT, persist_state="session",
                            help=t("generate.count.help", n=MAX_NEW_TOKENS))
    with cols[2]:
        many = st.button(t("generate.button.many", n=int(n)), key=keys.GEN_MANY,
                         disabled=ended or full, width="stretch")
    with cols[3]:
        again = st.button(t("generate.button.reset"), key=keys.GEN_RESET, disabled=gen is None,
                          width="stretch")
    if again:
        st.session_state.pop(keys.GENERATE_RUN, None)
        st.rerun()                           # the buttons again, as the state now is
    if one or many:
        total = min(MAX_NEW_TOKENS, count + (1 if one else int(n)))
        try:
            with st.spinner(t("generate.running", n=total - count)):
                gen = m.generate(text, max_new_tokens=total, temperature=temperature,
                                 seed=seed, chat=chat) if gen is None \
                    else m.generate_more(gen, total - count)
        except AttnvizInputError as exc:
            cannot_run(m, exc)
        linked = st.session_state.pop(keys.GEN_LINK_COUNT, None)
        if count == 0:                 # one generation from the prompt: a link's, for anyone
            _MADE.get((model_key(m), text, chat, temperature, seed, len(gen.steps)), lambda: gen)
        st.session_state[keys.GENERATE_RUN] = {
            "recipe": (model, text, chat, temperature, seed), "generation": gen}
        if not (linked and st.session_state.get(keys.GEN_STEP) in range(1, len(gen.steps) + 1)):
            st.session_state[keys.GEN_STEP] = len(gen.steps)      # a link's step is kept
        st.rerun()                           # the buttons again, as the state now is
    if gen is not None and gen.stopped == "eos":
        st.info(t("generate.stopped.eos"))
    elif gen is not None and len(gen.steps) >= MAX_NEW_TOKENS:
        st.info(t("generate.stopped.limit", n=MAX_NEW_TOKENS))
    return gen


END_ICON = ":material/stop_circle:"     # before the marked end of an answer (a font's ⏹ may lack)


def generated_text(gen: Generation) -> None:
    """The new tokens, then their text: an answer the model ended shows its end token
    (<|im_end|>) as a marked end below the text, not as characters of it."""
    new = gen.tokens[gen.prompt_length:]
    st.subheader(t("generate.new.subheader", count=len(new)))
    st.markdown(token_line(map(generate_figures.token_label, new)))
    _spans_note([s for s in gen.spans if s.last >= gen.prompt_length])
    st.code(answer_text(gen), language=None, wrap_lines=True)
    if gen.stopped == "eos":
        st.caption(END_ICON + " " + t("generate.answer.end", end=code(gen.steps[-1].token)))


def answer_text(gen: Generation) -> str:
    """The new tokens' text, without the end-of-answer token when the model chose it (its
    bytes are whole characters, so the text before it is the rest)."""
    return gen.text.removesuffix(gen.steps[-1].token) if gen.stopped == "eos" else gen.text


def step_picker(gen: Generation) -> int:
    """The new token to look at (1-based), the latest after a click."""
    n = len(gen.steps)
    if st.session_state.get(keys.GEN_STEP) not in range(1, n + 1):
        st.session_state[keys.GEN_STEP] = n
    if n == 1:
        return 1
    return st.select_slider(t("generate.step.label"), options=list(range(1, n + 1)),
                            key=keys.GEN_STEP, persist_state="session",
                            help=t("generate.step.help"))


def layer_picker(m: DecoderModel) -> int:
    if st.session_state.get(keys.GEN_LAYER) not in range(m.num_layers):   # absent, or a link's
        st.session_state[keys.GEN_LAYER] = m.num_layers - 1
    return st.selectbox(t("generate.layer.label"), list(range(m.num_layers)), key=keys.GEN_LAYER,
                        persist_state="session",
                        format_func=lambda l: t("figure.generate.layer", layer=l))


def step_view(m: DecoderModel, gen: Generation, number: int) -> None:
    """New token `number`: what chose it (its bars), its attention row in every head of a
    layer, the weight on the first token in every head, the KV cache."""
    step = gen.steps[number - 1]
    key_labels = gen.tokens[:step.query_position + 1]
    query = gen.tokens[step.query_position]
    st.subheader(t("generate.step.subheader", number=number))
    label = generate_figures.token_label
    # as the generated line reads it: a piece of a character as that character and its part
    shown = gen.tokens[step.query_position + 1]
    raw = m.byte_text(step.id)
    token = code(label(shown)) if shown == raw else \
        t("generate.step.token_bytes", token=code(label(shown)), bytes=code(raw))
    st.caption(t("generate.step.caption", number=number, token=token,
                 probability=step.probability, position=step.query_position,
                 query=code(label(query)), keys=step.cache_tokens))
    top = list(step.top)
    chosen = next((i for i, (tok, _) in enumerate(top) if tok == (step.label or step.token)),
                  None)
    if chosen is not None:          # the chosen token as the tokens after it read it: 北[1/2]
        top[chosen] = (shown, top[chosen][1])

    # one under the other: side by side, a narrow window cuts the bars' title
    widgets.chart(generate_figures.next_token_bars(
        top, chosen=chosen, title=t("figure.generate.step_bars.title", number=number)),
        key=keys.GEN_STEP_BARS)
    layer = layer_picker(m)
    st.caption(t("generate.row.caption", heads=m.num_heads, kv_heads=m.num_kv_heads,
                 keys=step.cache_tokens))
    fig = generate_figures.attention_row_map(
        step.attentions[layer], key_labels,
        title=generate_figures.row_title(number, shown, layer))
    widgets.chart(fig, key=keys.GEN_ROW_MAP)

    step_lens(m, gen, number)
    sink(step, key_labels[0])
    cache(m, gen, number)


def lens_of_step(m: DecoderModel, gen: Generation, number: int):
    """The logit lens of the position that chose new token `number`, its target that token:
    (LogitLens with one column, its rows' top tokens as the page writes them (R, k)). One pass
    over the text before the token, one position projected."""
    step = gen.steps[number - 1]
    context = gen.ids[:step.query_position + 1]

    def compute():
        lens = m.logit_lens(context, k=LENS_TOP, target=int(step.id), positions=[-1],
                            max_tokens=len(context))
        labels = [[token_shown(m.piece_after(context, int(j))) for j in row[0]]
                  for row in lens.top_ids]                              # (R, k)
        return lens, labels

    return _STEP_LENSES.get((model_key(m), context.tobytes(), int(step.id)), compute)


def step_lens(m: DecoderModel, gen: Generation, number: int) -> None:
    """New token `number`'s position read after every layer (the logit lens): the top token
    at each layer boundary and the rank of the token generated."""
    step = gen.steps[number - 1]
    label = generate_figures.token_label
    query = code(label(gen.tokens[step.query_position]))
    st.subheader(t("generate.lens.subheader", number=number))
    with st.spinner(t("generate.lens.computing", position=step.query_position)):
        try:
            lens, labels = lens_of_step(m, gen, number)
        except AttnvizInputError as exc:
            cannot_run(m, exc)
    shown = token_shown(gen.tokens[step.query_position + 1])   # as the step view names it
    token = code(shown)
    st.caption(t("generate.lens.caption", position=step.query_position, query=query,
                 token=token))
    rows = [reading_view.lens_row_label(kind, layer) for kind, layer in lens.rows]
    ranks, probs = lens.target_rank[:, 0], lens.target_prob[:, 0]
    widgets.chart(lens_figures.step_lens(
        lens.top_probs[:, 0], labels, ranks, probs, row_labels=rows, token=shown,
        title=t("figure.generate.lens.title", position=step.query_position)),
        key=keys.GEN_LENS)
    top = np.flatnonzero(ranks == 1)
    if top.size:
        st.caption(t("generate.lens.first_top", token=token, row=rows[int(top[0])],
                     probability=f"{float(probs[-1]):.3f}"))
    else:
        st.caption(t("generate.lens.never_top", token=token, rank=int(ranks[-1]),
                     probability=f"{float(probs[-1]):.3f}"))


def sink(step, first: str) -> None:
    """The weight on the first token, every layer and head, at this step."""
    first_weights = step.attentions[:, :, 0]                 # (layers, heads)
    st.subheader(t("generate.sink.subheader"))
    st.caption(t("generate.sink.caption", first=code(generate_figures.token_label(first)),
                 mean=float(first_weights.mean()), over=int((first_weights > 0.5).sum()),
                 heads=first_weights.size, keys=step.cache_tokens))
    widgets.chart(generate_figures.sink_map(first_weights, title=t("figure.generate.sink.title")),
                  key=keys.GEN_SINK_MAP)


def cache(m: DecoderModel, gen: Generation, number: int) -> None:
    """The KV cache when new token `number` was chosen, and at every step."""
    step = gen.steps[number - 1]
    st.subheader(t("generate.cache.subheader"))
    kept = step.cache_kept or (step.cache_tokens,) * m.num_layers     # positions, per layer
    vectors = 2 * m.num_kv_heads * sum(kept)
    cols = st.columns(3)
    cols[0].metric(t("generate.cache.positions"), step.cache_tokens)
    cols[1].metric(t("generate.cache.vectors"), f"{vectors:,}")
    cols[2].metric(t("generate.cache.bytes"), f"{step.cache_bytes:,}")
    per_token = 2 * m.num_layers * m.num_kv_heads * m.d_k * 4
    with_cache = gen.prompt_length + len(gen.steps) - 1
    without = sum(s.cache_tokens for s in gen.steps)
    st.caption(t("generate.cache.caption", layers=m.num_layers, kv_heads=m.num_kv_heads,
                 d_k=m.d_k, per_token=per_token, prompt=gen.prompt_length,
                 steps=len(gen.steps), computed=with_cache, without=without))
    _window_note(m, step)
    widgets.chart(generate_figures.cache_bars(
        [s.cache_tokens for s in gen.steps], [s.cache_bytes for s in gen.steps],
        selected=number - 1, title=t("figure.generate.cache.title")), key=keys.GEN_CACHE_BARS)


def _window_note(m: DecoderModel, step) -> None:
    """On a model with sliding-window layers (Gemma 3: window 512), what each kind of layer's
    cache holds at this step: the local layers only the last positions of their window (their
    rows are 0 before them, those keys dropped), the global ones every position."""
    windows = [m.config.window_of(layer) for layer in range(m.num_layers)]
    window = max((w for w in windows if w), default=None)
    if window is None:
        return
    local = [layer for layer, w in enumerate(windows) if w]
    full = [layer for layer, w in enumerate(windows) if not w]
    first = max(step.cache_first) if step.cache_first else 0
    shown = dict(model=m.model_name, window=window, local=len(local), layers=m.num_layers,
                 full=", ".join(map(str, full)), total=step.cache_tokens)
    if first:
        st.info(t("generate.cache.window", first=first, last=step.query_position, **shown),
                icon=":material/crop:")
    else:
        st.caption(t("generate.cache.window_not_reached", **shown))
