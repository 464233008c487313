"""Head atlas: every head of the sidebar's language model over a corpus
(``attnviz.models.readers.atlas``: a reduction of the texts, one pass each), then one head opened.

The corpus is a bundled one (``attnviz.tutorials.atlas_corpus``) or the learner's texts (typed,
or a .txt/.jsonl/.csv file: ``attnviz.io.atlas_files.texts_of``). The atlas is built on the
server's queue for heavy work (``attnviz.models.heavy``), as Trace's patching is: one job per
(model file, corpus, settings) whoever asks, polled with Stop and Resume (a stopped reduction's
partial merged with that of the texts left: ``atlas.reduce(progress=)``). A finished atlas is
kept for every learner (``_ATLASES``), and so is an opened head's t-SNE map, asked for with a
button and computed on the same queue (``_TSNES``). A link carries the corpus — a bundled one
by name, the learner's own by its hash, the texts kept on the server (``_USER_CORPORA``) — and
every pick, but never starts a build or a t-SNE.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass

import numpy as np
import streamlit as st

from attnviz.app import keys
from attnviz.app.pretrained.pretrained_view import keep_in_range
from attnviz.app.shared import heavy_jobs, links, widgets
from attnviz.app.shared.text import MAX_TEXT_CHARS, code, literal
from attnviz.core.cache import SizedCache
from attnviz.core.errors import AttnvizInputError
from attnviz.core.inputs import MAX_TOKENS
from attnviz.core.modes import Mode
from attnviz.describe.labels import token_shown
from attnviz.i18n import language, t
from attnviz.io.atlas_files import SUFFIXES, texts_of, write_atlas
from attnviz.io.head_atlas import HeadAtlas
from attnviz.io.matrix_files import MAX_UPLOAD_MB
from attnviz.models.readers import atlas, atlas_map
from attnviz.plot import atlas_figures, figures
from attnviz.tutorials import atlas_corpus

CORPORA = ("en", "zh", "all", "custom")      # atlas.corpus.option.*
CUSTOM = CORPORA[-1]
DEFAULT_X, DEFAULT_Y = "entropy", "induction"
TOP_EXAMPLES = 5            # the opened head's examples shown
RELATED = 5                 # its related heads listed
HOVER_CHARS = 60           # a map point's text in its hover: the text's start
ROW_KEYS = 32               # an example's row: the keys drawn (the first, the last to the query)
EXAMPLE_HEIGHT = 220        # px: its one row
HEAD_COLOURS = ("layer", "cluster")      # atlas.heads_colour.option.*
CLUSTERS = 8                             # the clusters of heads (by their mean patterns)
METHODS = ("pca", "tsne")                # the map's (atlas.map.method.option.*)
COLOURS = ("kind", "position", "token")  # its colours (atlas.map.colour.option.*)
METHOD_NAMES = {"pca": "PCA", "tsne": "t-SNE"}

# the learners' own corpora by their hash (corpus_hash), what a link names as USER + hash: kept
# while the server runs, the least recently used dropped past 64 MB (a link to one says so)
USER = keys.LINK_STAND_INS[keys.AT_CORPUS][0]
_USER_CORPORA = SizedCache(max_bytes=64 * 2**20, max_entries=256, size_of=lambda c: c.nbytes,
                           max_idle=None)
# finished atlases, the same for every learner on the same model file, corpus and settings
_ATLASES = SizedCache(max_bytes=200 * 2**20, max_entries=16, size_of=lambda b: b.nbytes)
# (texts, tokens) of a corpus in a model's tokenizer, each text cut to its window
_COUNTS = SizedCache(max_bytes=2**20, max_entries=64, size_of=lambda c: 64)
# the opened heads' t-SNE maps (2S, 2), per atlas, head and RoPE choice
_TSNES = SizedCache(max_bytes=16 * 2**20, max_entries=64, size_of=lambda a: a.nbytes)
# an example's attention row (one text run again), per model, text, head and position
_ROWS = SizedCache(max_bytes=4 * 2**20, max_entries=256,
                   size_of=lambda r: r[0].nbytes + 64 * len(r[1]))
# every head's PCA map before RoPE (the maps after it are the atlas's), per atlas
_UNTURNED = SizedCache(max_bytes=32 * 2**20, max_entries=8, size_of=lambda a: a.nbytes)
# an example's text as its link to Step by step carries it (the start holding its first tokens)
_STARTS = SizedCache(max_bytes=2**20, max_entries=256, size_of=lambda s: 64 + 4 * len(s[0]))


@dataclass(eq=False)
class Built:
    """A reduction as far as it went: the partial of the first `done` texts of `total`, and
    every head's PCA map once all are read."""

    partial: atlas.Partial
    done: int
    total: int
    maps: np.ndarray | None = None

    @property
    def complete(self) -> bool:
        return self.done >= self.total

    @property
    def nbytes(self) -> int:
        return self.partial.nbytes + (0 if self.maps is None else self.maps.nbytes)

    def head_atlas(self) -> HeadAtlas:
        return HeadAtlas(self.partial, self.maps)


# ---- the corpus --------------------------------------------------------------------------------

@dataclass(frozen=True)
class UserCorpus:
    """A learner's corpus as the page had it: the typed texts (the box's text) and the texts
    of an uploaded file (its name; None: no file)."""

    typed: str
    file: str | None = None
    uploaded: tuple[str, ...] = ()

    @property
    def nbytes(self) -> int:
        return sum(len(x.encode("utf-8")) for x in (self.typed, self.file or "", *self.uploaded))


def _bundled() -> str:
    return "zh" if language() == "zh" else "en"


def _corpus_changed() -> None:
    """on_change of the corpus choice: a link's unknown corpus is no longer the point."""
    st.session_state.pop(keys.AT_CORPUS_UNKNOWN, None)


def _from_link() -> None:
    """A link's learner corpus ("user:<hash>", read by links.read_once) put back from the
    server's store before the widgets are drawn — its typed texts in the box, a file's texts
    kept beside the uploader — or, when the server does not have it (never, or no longer), the
    bundled corpus of the page's language, said by `corpus`."""
    asked = st.session_state.pop(keys.AT_CORPUS_ASKED, None)
    if not isinstance(asked, str):
        return
    kept = _USER_CORPORA.peek(asked[len(USER):]) if asked.startswith(USER) else None
    if kept is None:
        st.session_state[keys.AT_CORPUS] = _bundled()
        st.session_state[keys.AT_CORPUS_UNKNOWN] = asked
        return
    st.session_state[keys.AT_CORPUS] = CUSTOM
    st.session_state[keys.AT_TEXTS] = kept.typed
    st.session_state[keys.AT_KEPT_UPLOAD] = (kept.file, kept.uploaded) if kept.file else None
    st.session_state.pop(keys.AT_CORPUS_UNKNOWN, None)


def _forget_upload() -> None:
    st.session_state[keys.AT_KEPT_UPLOAD] = None


def corpus() -> list[str]:
    """The corpus chosen: a bundled one (its source and licence said) or the learner's typed
    texts and uploaded file; [] when there is none yet (said). The learner's own corpus is
    kept on the server by its hash (``USER`` + ``corpus_hash``), the name a link carries
    (keys.LINK_STAND_INS): a reload or the link brings it back, a hash the server does not
    have is said and the bundled corpus offered."""
    _from_link()
    if st.session_state.get(keys.AT_CORPUS) not in CORPORA:
        st.session_state[keys.AT_CORPUS] = _bundled()
    unknown = st.session_state.get(keys.AT_CORPUS_UNKNOWN)
    if unknown:
        st.warning(t("atlas.corpus.unknown", name=code(unknown[:len(USER) + 12])),
                   icon=":material/link_off:")
    name = st.radio(t("atlas.corpus.label"), CORPORA, key=keys.AT_CORPUS, horizontal=True,
                    persist_state="session", format_func=lambda c: t(f"atlas.corpus.option.{c}"),
                    help=t("atlas.corpus.help"), on_change=_corpus_changed)
    st.session_state[keys.AT_CORPUS_NAMED] = None
    if name != CUSTOM:
        texts = atlas_corpus.texts(name)
        st.caption(t("atlas.corpus.source", texts=len(texts),
                     readme=code("attnviz/tutorials/atlas_corpus/README.md")))
        return texts
    if not isinstance(st.session_state.get(keys.AT_TEXTS), str):
        st.session_state[keys.AT_TEXTS] = ""
    typed = st.text_area(t("atlas.texts.label"), key=keys.AT_TEXTS, max_chars=MAX_TEXT_CHARS,
                         persist_state="session", placeholder=t("atlas.texts.placeholder"),
                         help=t("atlas.texts.help"))
    texts = [p.strip() for p in typed.replace("\r\n", "\n").split("\n\n") if p.strip()]
    file = st.file_uploader(t("atlas.upload.label"),
                            type=[s.lstrip(".") for s in SUFFIXES], key=keys.AT_UPLOAD,
                            max_upload_size=MAX_UPLOAD_MB,
                            help=t("atlas.upload.help", megabytes=MAX_UPLOAD_MB))
    uploaded = None
    if file is not None:
        st.session_state[keys.AT_KEPT_UPLOAD] = None         # a new file replaces a kept one
        try:
            uploaded = (file.name, tuple(texts_of(file.name, file.getvalue())))
        except AttnvizInputError as exc:
            st.error(literal(exc.message or exc))
        except (ValueError, KeyError, TypeError) as exc:    # bad UTF-8, JSON, a missing "text"
            st.error(t("atlas.upload.error", name=literal(file.name), error=literal(exc)))
    else:
        uploaded = _kept_upload()
    texts += list(uploaded[1]) if uploaded else []
    if texts:
        st.session_state[keys.AT_CORPUS_NAMED] = remember(
            UserCorpus(typed, *(uploaded or (None, ()))), texts)
    return texts


def _kept_upload() -> tuple[str, tuple[str, ...]] | None:
    """The texts of a file a link's corpus brought back (said, with a button leaving them
    out), or None."""
    kept = st.session_state.get(keys.AT_KEPT_UPLOAD)
    if not (isinstance(kept, tuple) and len(kept) == 2):
        return None
    left, right = st.columns([4, 1], vertical_alignment="center")
    left.caption(t("atlas.upload.kept", name=literal(kept[0]), texts=len(kept[1])))
    widgets.action_button(t("atlas.upload.forget"), _forget_upload, key=keys.AT_FORGET_UPLOAD,
                          where=right, icon=":material/close:")
    return kept


def remember(kept: UserCorpus, texts: list[str]) -> str:
    """Keep the learner's corpus on the server under its hash; the name a link carries."""
    corpus_id = corpus_hash(texts)
    _USER_CORPORA.get(corpus_id, lambda: kept)
    return USER + corpus_id


def corpus_hash(texts: list[str]) -> str:
    """The corpus's name: a hash of its texts in order."""
    h = hashlib.blake2b(digest_size=16)
    for text in texts:
        h.update(text.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def counts(m, name: str, corpus_id: str, texts: list[str]) -> tuple[int, int]:
    """(texts, tokens) the atlas reads, each text cut to the model's window (a text of fewer
    than 2 tokens is not read), counted once per model and corpus."""
    def count() -> tuple[int, int]:
        sizes = [min(len(m.encode(text)), m.max_tokens) for text in texts]
        return sum(1 for n in sizes if n >= 2), sum(n for n in sizes if n >= 2)
    return _COUNTS.get((name, corpus_id), count)


def atlas_key(entry, m, corpus_id: str) -> tuple:
    """One atlas per model file, corpus and settings."""
    return ("atlas", entry.name, str(getattr(m, "path", "")), corpus_id, atlas.Settings())


# ---- the build, on the server's queue -------------------------------------------------------------

def _work(m, key: tuple, texts: list[str]):
    """The reduction as the queue runs it (``heavy.Work``), a text a unit: resumed from a
    stopped job's partial (the texts left reduced and merged with it); a finished atlas, with
    every head's PCA map, kept for every learner."""
    total = len(texts)

    def work(resume: Built | None, progress, should_stop) -> Built:
        start = 0 if resume is None else resume.done

        def step(done: int) -> bool:
            progress(start + done, total)
            return not should_stop()

        part = atlas.reduce(m, texts[start:], progress=step)
        read = part.texts + part.skipped
        if resume is not None:
            part = atlas.merge(resume.partial, part)
        built = Built(part, start + read, total)
        if built.complete:
            built.maps = atlas_map.pca_all(part)
            _ATLASES.get(key, lambda: built)
        return built
    return work


def _ask(key: tuple, work, total: int) -> None:
    """on_click of Build and Resume: this learner joins the server's job for this atlas."""
    heavy_jobs.join(key, work, total, job_key=keys.AT_JOB, stopped_key=keys.AT_STOPPED_FOR)


def build(m, key: tuple, texts: list[str]) -> Built | None:
    """The atlas of `key` if built (for any learner), else the Build button, the job's
    progress with Stop, or Resume after a stop; None until it is built."""
    built = _ATLASES.peek(key)
    if built is not None:
        return built
    total = len(texts)
    job, token = heavy_jobs.mine(keys.AT_JOB, key)
    stopped = st.session_state.get(keys.AT_STOPPED_FOR) == key
    if job is not None and not stopped:
        if job.running:
            heavy_jobs.live(job, token, "atlas", heavy_jobs.counted("atlas", total),
                            heavy_jobs.leave, (key, job, token, keys.AT_STOPPED_FOR),
                            keys.AT_STOP)
            return None
        if job.ended == "failed":
            st.error(t("atlas.error", error=literal(job.error)))
        elif job.result is not None and job.result.complete:
            return _ATLASES.get(key, lambda: job.result)
        else:
            stopped = True
    work = _work(m, key, texts)
    if stopped:
        _, done = heavy_jobs.stopped_partial(key, job)
        st.info(t("atlas.stopped", done=done, total=total))
        widgets.action_button(t("atlas.resume"), _ask, (key, work, total),
                              key=keys.AT_RESUME, icon=":material/play_arrow:")
        return None
    widgets.action_button(t("atlas.build", texts=total), _ask, (key, work, total),
                          key=keys.AT_BUILD, type="primary", icon=":material/play_arrow:",
                          help=t("atlas.build.help"))
    return None


# ---- the views of a built atlas ----------------------------------------------------------------------

def _metric_pick(label: str, key: str, default: str, where) -> str:
    if st.session_state.get(key) not in atlas.METRICS:
        st.session_state[key] = default
    return where.selectbox(label, atlas.METRICS, key=key, persist_state="session",
                           format_func=lambda name: t(f"atlas.metric.{name}"))


def _choice(key: str, options: tuple, label: str, messages: str, where) -> str:
    if st.session_state.get(key) not in options:
        st.session_state[key] = options[0]
    return where.radio(label, options, key=key, horizontal=True, persist_state="session",
                       format_func=lambda o: t(f"{messages}.{o}"))


def _pick_head(points: list[dict]) -> None:
    """on_click of the scatter: the clicked point's (layer, head), its customdata."""
    for point in reversed(points):
        data = point.get("customdata")
        if isinstance(data, (list, tuple)) and len(data) >= 2:
            st.session_state[keys.AT_LAYER], st.session_state[keys.AT_HEAD] = \
                int(data[0]), int(data[1])
            return


def heads(built: Built) -> tuple[int, int]:
    """Every head as a point on two chosen metrics, coloured by layer or by cluster (of the
    mean patterns, ``atlas_map.head_clusters``); a click (or the two pickers) opens a head:
    its (layer, head)."""
    p = built.partial
    layers, heads_ = p.shape
    st.caption(t("atlas.built", texts=p.texts, tokens=p.tokens, skipped=p.skipped,
                 heads=layers * heads_))
    left, middle, right = st.columns(3)
    x = _metric_pick(t("atlas.x"), keys.AT_X, DEFAULT_X, left)
    y = _metric_pick(t("atlas.y"), keys.AT_Y, DEFAULT_Y, middle)
    by = _choice(keys.AT_HEADS_COLOUR, HEAD_COLOURS, t("atlas.heads_colour.label"),
                 "atlas.heads_colour.option", right)
    keep_in_range(keys.AT_LAYER, layers)
    keep_in_range(keys.AT_HEAD, heads_)
    picked = st.session_state[keys.AT_LAYER], st.session_state[keys.AT_HEAD]
    clusters = atlas_map.head_clusters(p, CLUSTERS) if by == "cluster" else None
    widgets.chart(atlas_figures.heads_scatter(p.means(), x, y, model=p.model, picked=picked,
                                              clusters=clusters),
                  key=keys.AT_SCATTER, on_click=_pick_head)
    if clusters is not None:
        st.caption(t("atlas.clusters.caption", clusters=int(clusters.max()) + 1))
    st.caption(t("atlas.click"))
    left, right = st.columns(2)
    layer = left.selectbox(t("atlas.layer"), list(range(layers)), key=keys.AT_LAYER,
                           persist_state="session")
    head = right.selectbox(t("atlas.head"), list(range(heads_)), key=keys.AT_HEAD,
                           persist_state="session")
    return int(layer), int(head)


def _row(m, model: str, text: str, layer: int, head: int, position: int):
    """(the row of weights of query `position` over keys 0 … position, the text's tokens):
    the text's layers 0 … `layer` run again, as the atlas read it (alone, cut to the model's
    window), the row taken from that layer's pattern as it is made."""
    def computed():
        ids = m.encode(text)[:m.max_tokens]
        found = {}

        def read(at: int, name: str, value: np.ndarray) -> None:
            if at == layer and name == "pattern":
                found["row"] = np.array(value[0, head, position, :position + 1])

        m.run_layers(m.token_embeddings(ids), 0, layer + 1, hook=read)
        return found["row"], m.labels(ids)[0][:position + 1]
    return _ROWS.get((model, str(getattr(m, "path", "")), int(atlas.text_id(text)), layer, head,
                      position), computed)


def _start(m, model: str, text: str, tokens: int) -> tuple[str, int]:
    """(the shortest start of `text` whose first `tokens` token ids are the text's own — the
    whole text if no start is —, the text's tokens as the atlas read it, cut to the window)."""
    def computed() -> tuple[str, int]:
        ids = m.encode(text)[:m.max_tokens]
        want = ids[:tokens]

        def holds(chars: int) -> bool:
            return np.array_equal(m.encode(text[:chars])[:tokens], want)

        low, high = 1, len(text)          # a tokenizer splits words apart: `holds` only grows
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if holds(middle) else (middle + 1, high)
        return (text[:low] if holds(low) else text), len(ids)
    return _STARTS.get((model, str(getattr(m, "path", "")), int(atlas.text_id(text)), tokens),
                       computed)


def step_link(m, model: str, text: str, layer: int, head: int, position: int
              ) -> tuple[str, int] | None:
    """(the link opening `text` on Step by step at `layer` and `head` — the sidebar's model,
    the text's start holding tokens 0 … `position` and a limit of that many tokens, so the
    query is the last row: a causal row reads no later token —, the text's tokens); None when
    Step by step could not read that far (its limit, MAX_TOKENS, or its box's length)."""
    tokens = position + 1
    if tokens > MAX_TOKENS:
        return None
    start, total = _start(m, model, text, tokens)
    if len(start) > MAX_TEXT_CHARS:
        return None
    return links.to_page("steps", mode=Mode.PRETRAINED.value, model=model, sentence=start,
                         max_tokens=tokens, layer=layer, head=head, step="weights"), total


def _open_button(link: tuple[str, int] | None, layer: int, head: int, position: int) -> None:
    if link is None:
        st.caption(t("atlas.example.open.none", tokens=MAX_TOKENS))
        return
    url, total = link
    st.link_button(t("atlas.example.open", layer=layer, head=head, position=position), url,
                   icon=":material/footprint:",
                   help=t("atlas.example.open.help", tokens=position + 1, total=total))


def examples(m, built: Built, layer: int, head: int, model: str) -> None:
    """The head's most concentrated rows over the corpus, each drawn as its row of attention
    over the keys before it, with a link opening its text on Step by step at that layer and
    head (``step_link``)."""
    st.subheader(t("atlas.examples.subheader", layer=layer, head=head))
    means = built.partial.means()
    st.markdown(" · ".join(f"{t(f'atlas.metric.{name}')} {means[name][layer, head]:.3g}"
                           for name in atlas.METRICS))
    fewest = built.partial.settings.min_keys
    st.caption(t("atlas.examples.caption", keys=fewest, first=fewest - 1))
    found = built.head_atlas().top_examples(layer, head, k=TOP_EXAMPLES)
    if not found:
        st.info(t("atlas.examples.none"))
        return
    for i, (text, position, score) in enumerate(found):
        row, tokens = _row(m, built.partial.model, text, layer, head, position)
        # the first key (where a head parks its weight) and the last ones up to the query
        first = max(1, position + 2 - ROW_KEYS)
        drawn = [0, *range(first, position + 1)]
        shown = [token_shown(s) for s in tokens]
        st.markdown(t("atlas.example", number=i + 1, position=position,
                      token=code(shown[position]), score=f"{score:.3f}",
                      text=code(_excerpt(text))))
        _open_button(step_link(m, model, text, layer, head, position), layer, head, position)
        fig = figures.heatmap(row[None, drawn], row_labels=[shown[position]],
                              col_labels=[shown[j] for j in drawn], kind="weights",
                              show_values=False, col_title=t("figure.axis.key"),
                              title=t("atlas.example.title", layer=layer, head=head,
                                      position=position))
        fig.update_layout(height=EXAMPLE_HEIGHT)
        widgets.chart(fig, key=keys.AT_EXAMPLE(i))
        if first > 1:
            st.caption(t("atlas.example.between", keys=first - 1,
                         weight=f"{float(row[1:first].sum()):.3f}"))


def deciles(m, built: Built, layer: int, head: int, model: str) -> None:
    """One row of the head from each tenth of the largest weight (the reservoirs' first: the
    row of smallest seeded priority among the corpus's rows of that tenth), as a line each,
    its link opening the text on Step by step at that layer and head (``step_link``)."""
    p = built.partial
    lines = []
    for d in range(atlas.DECILES):
        text_id, position = p.res_text[layer, head, d, 0], int(p.res_pos[layer, head, d, 0])
        if position < 0:
            continue
        text = p.corpus[np.uint64(text_id)]
        token = token_shown(m.labels(m.encode(text)[:m.max_tokens])[0][position])
        lines.append(t("atlas.deciles.item", low=f"{d / atlas.DECILES:.1f}",
                       high=f"{(d + 1) / atlas.DECILES:.1f}", position=position,
                       token=code(token), score=f"{p.res_score[layer, head, d, 0]:.3f}",
                       text=code(_excerpt(text, 100))))
        link = step_link(m, model, text, layer, head, position)
        if link is not None:
            lines[-1] += " · " + t("atlas.deciles.open", url=link[0], tokens=position + 1,
                                   total=link[1])
    with st.expander(t("atlas.deciles.label")):
        fewest = p.settings.min_keys
        st.caption(t("atlas.deciles.caption", keys=fewest, first=fewest - 1))
        st.markdown("  \n".join(lines))


def _excerpt(text: str, chars: int = 160) -> str:
    """The text's start, on one line."""
    line = " ".join(text.split())
    return line if len(line) <= chars else line[:chars - 1] + "…"


def qk_map(built: Built, key: tuple, layer: int, head: int) -> None:
    """The head's sampled queries and keys over the corpus in one 2-D map, with what the joint
    map changes and keeps: by PCA (precomputed for every head after RoPE; before RoPE computed
    here, one SVD) or by t-SNE (on the server's queue, asked for with a button and kept per
    atlas, head and RoPE choice); coloured by query / key, by position or by token (the
    sample's most frequent tokens each a colour, the others grey)."""
    st.subheader(t("atlas.map.subheader"))
    p = built.partial
    samples = len(p.sample_pos)
    if not samples or built.maps is None:
        st.info(t("atlas.map.none"))
        return
    st.caption(t("atlas.map.caption", samples=samples))
    left, middle, right = st.columns(3)
    method = _choice(keys.AT_METHOD, METHODS, t("atlas.map.method.label"),
                     "atlas.map.method.option", left)
    colour = _choice(keys.AT_COLOUR, COLOURS, t("atlas.map.colour.label"),
                     "atlas.map.colour.option", middle)
    if not isinstance(st.session_state.get(keys.AT_ROTATED), bool):
        st.session_state[keys.AT_ROTATED] = True
    rotated = right.toggle(t("atlas.map.rotated.label"), key=keys.AT_ROTATED,
                           persist_state="session", help=t("atlas.map.rotated.help"))
    st.caption(t("atlas.map.rotated.yes" if rotated else "atlas.map.rotated.no"))
    if method == "tsne":
        points = tsne(built, key, layer, head, rotated)
        if points is None:
            return
    elif rotated:
        points = built.maps[layer, head]
    else:
        points = atlas_map.pca(atlas_map.head_points(p, layer, head, rotated=False))
    widgets.chart(atlas_figures.qk_map(points, samples, tokens=p.sample_token, layer=layer,
                                       head=head, method=METHOD_NAMES[method],
                                       positions=p.sample_pos if colour == "position" else None,
                                       by_token=colour == "token",
                                       texts=sample_texts(p)),
                  key=keys.AT_MAP)
    if colour == "token":
        st.caption(t("atlas.map.colour.token_caption",
                     tokens=len(atlas_figures.token_groups(p.sample_token)[0])))


def sample_texts(p: atlas.Partial) -> list[str]:
    """Each sampled position's text as the map's hover names it: its start, on one line, at
    most HOVER_CHARS characters."""
    return [_excerpt(p.corpus[np.uint64(i)], HOVER_CHARS) for i in p.sample_text]


def grid(built: Built, key: tuple, layer: int, head: int) -> None:
    """Every head's joint map by PCA at once (``atlas_figures.pca_grid``: a cell a head, the
    same sampled positions in each), after RoPE or before as the map above; a click on a cell's
    point opens that head, as the scatter of heads does."""
    p = built.partial
    samples = len(p.sample_pos)
    if not samples or built.maps is None:
        return
    st.subheader(t("atlas.grid.subheader"))
    rotated = st.session_state.get(keys.AT_ROTATED) is not False
    maps = built.maps if rotated else _UNTURNED.get(
        key, lambda: atlas_map.pca_all(p, rotated=False))
    st.caption(t("atlas.grid.caption",
                 positions=len(atlas_figures.grid_rows(samples)), samples=samples,
                 rope=t("atlas.grid.after" if rotated else "atlas.grid.before")))
    widgets.chart(atlas_figures.pca_grid(maps, samples, model=p.model, picked=(layer, head)),
                  key=keys.AT_GRID, on_click=_pick_head)


def tsne_key(key: tuple, layer: int, head: int, rotated: bool) -> tuple:
    """One t-SNE per atlas, head and RoPE choice."""
    return ("atlas-tsne", key, layer, head, bool(rotated))


def _tsne_work(partial: atlas.Partial, key: tuple, layer: int, head: int, rotated: bool):
    """The head's t-SNE as the queue runs it (one unit: scikit-learn's t-SNE does not stop
    half-way), kept for every learner."""
    def work(resume, progress, should_stop) -> np.ndarray:
        points = atlas_map.tsne(atlas_map.head_points(partial, layer, head, rotated=rotated))
        progress(1, 1)
        return _TSNES.get(key, lambda: points)
    return work


def _ask_tsne(key: tuple, work) -> None:
    """on_click of the t-SNE button: this learner joins the server's job for it."""
    heavy_jobs.join(key, work, 1, job_key=keys.AT_TSNE_JOB,
                    stopped_key=keys.AT_TSNE_STOPPED_FOR)


def tsne(built: Built, key: tuple, layer: int, head: int, rotated: bool) -> np.ndarray | None:
    """The head's t-SNE map (2S, 2) if computed (for any learner), else the button asking for
    it or the job's progress with Stop; None until it is computed."""
    key = tsne_key(key, layer, head, rotated)
    points = _TSNES.peek(key)
    if points is not None:
        return points
    job, token = heavy_jobs.mine(keys.AT_TSNE_JOB, key)
    stopped = st.session_state.get(keys.AT_TSNE_STOPPED_FOR) == key
    if job is not None and not stopped:
        if job.running:
            count = 2 * len(built.partial.sample_pos)
            heavy_jobs.live(job, token, "atlas.tsne",
                            lambda _: (0.0, t("atlas.tsne.progress", points=count)),
                            heavy_jobs.leave, (key, job, token, keys.AT_TSNE_STOPPED_FOR),
                            keys.AT_TSNE_STOP)
            return None
        if job.ended == "failed":
            st.error(t("atlas.tsne.error", error=literal(job.error)))
        elif job.result is not None:
            return _TSNES.get(key, lambda: job.result)
    widgets.action_button(t("atlas.tsne.run", layer=layer, head=head), _ask_tsne,
                          (key, _tsne_work(built.partial, key, layer, head, rotated)),
                          key=keys.AT_TSNE_RUN, icon=":material/play_arrow:",
                          help=t("atlas.tsne.help"))
    return None


def related(built: Built, layer: int, head: int) -> None:
    """The heads whose mean patterns over the corpus are most alike the opened one's."""
    st.subheader(t("atlas.related.subheader"))
    st.caption(t("atlas.related.caption"))
    found = built.head_atlas().related(layer, head, k=RELATED)
    st.markdown("  \n".join(t("atlas.related.item", layer=l, head=h, similarity=f"{s:.3f}")
                            for l, h, s in found))


def downloads(built: Built, corpus_id: str) -> None:
    """The per-head table (CSV, and the same table as JSON records: one object a head, NaN as
    null) and the whole atlas (.npz, ``attnviz.HeadAtlas.load``), each made when clicked."""
    name = f"attnviz_atlas_{corpus_id[:8]}"

    def table() -> str:
        return built.head_atlas().metrics.to_csv(index=False)

    def records() -> str:       # Python's floats: the CSV's shortest round-trip digits
        rows = built.head_atlas().metrics.to_dict("records")
        return json.dumps([{c: None if v != v else v for c, v in row.items()} for row in rows],
                          allow_nan=False, ensure_ascii=False)

    def npz() -> bytes:
        out = io.BytesIO()
        write_atlas(out, built.partial, built.maps)
        return out.getvalue()

    st.subheader(t("atlas.downloads.subheader"))
    left, middle, right = st.columns(3)
    left.download_button(t("atlas.downloads.csv"), table, f"{name}.csv", "text/csv",
                         key=keys.AT_CSV, on_click="ignore", icon=":material/download:")
    middle.download_button(t("atlas.downloads.json"), records, f"{name}.json",
                           "application/json", key=keys.AT_JSON, on_click="ignore",
                           icon=":material/download:")
    right.download_button(t("atlas.downloads.npz"), npz, f"{name}.npz",
                          "application/octet-stream", key=keys.AT_FILE, on_click="ignore",
                          icon=":material/download:")
    st.caption(t("atlas.downloads.caption", call=code("attnviz.HeadAtlas.load(path)")))


__all__ = ["Built", "COLOURS", "CORPORA", "HEAD_COLOURS", "METHODS", "USER", "UserCorpus",
           "atlas_key", "build", "corpus", "corpus_hash", "counts", "deciles", "downloads",
           "examples", "grid", "heads", "qk_map", "related", "remember", "tsne", "tsne_key"]
