"""Activation patching (Meng et al. 2022; Wang et al. 2022, "IOI") on SmolLM2: run a corrupted
prompt, put back one activation from a clean prompt of the same length, and measure how much of
the clean answer returns.

    metric(run)  = logit(answer_clean) − logit(answer_corrupted)   at the last position
    effect       = (metric_patched − metric_corrupted) / (metric_clean − metric_corrupted)
                   0: as the corrupted run, 1: as the clean run

What is patched (``where``), one patch at a time, from the clean run into the corrupted one:

    "resid"      the residual stream before layer ℓ (resid_pre; ℓ = L: after the last layer)
                 at position p                                        effect (L + 1, n)
    "attn"       layer ℓ's attention output (attn_out, after W_O) at position p    (L, n)
    "mlp"        layer ℓ's MLP output (mlp_out) at position p                     (L, n)
    "heads"      head h's z (its output before W_O) of layer ℓ at every position  (L, H)
    "heads_pos"  head h's z of the chosen `layer` at position p                   (H, n)

Exact patching: every patch is its own forward pass from the patched layer on, started from
the corrupted run's residual stream before that layer (the layers before it are the corrupted
run's, never recomputed); the patches of one layer run side by side, ``batch`` at a time
(``DecoderModel.run_layers`` with a hook, as the head ranking of ``decoder_reading``). The
tokens the two prompts share before the first that differs give the same numbers in both runs
(causal attention): they are computed once and every run reads their keys and values from a
cache, computing only the positions from the first difference on. A patch that puts back what
the corrupted run already has (any position before that difference) is not run: its metric is
the corrupted one, so it gives 0 exactly; a residual patch that makes the stream the clean run's
own (the whole clean input) is not run either: it gives 1 exactly. The other patches run side
by side in a batch, each as it would alone up to float32 rounding (a BLAS kernel may sum a
batch's rows in another order than one row's: ~1e-6 of the stream's scale).

``should_stop()``, asked before each batch, stops early: the result is partial
(``complete=False``, NaN where not computed) and ``patch(…, resume=partial)`` computes only
what is missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from attnviz.core.arrays import readonly, whole_number
from attnviz.core.errors import AttnvizInputError
from attnviz.models.readers.lens import text_ids, token_id
from attnviz.models.decoders.llama_layer import KVCache

__all__ = ["WHERE", "Patching", "effect_shape", "patch", "patch_once", "patch_work"]

WHERE = ("resid", "attn", "mlp", "heads", "heads_pos")
BATCH = 16                  # patched sequences run side by side
_POINT = {"attn": "attn_out", "mlp": "mlp_out", "heads": "z", "heads_pos": "z"}
_DTYPE = np.float32
# what effect's rows and columns are, by where (an export says it)
AXES = {"resid": ("layer boundary: 0 the embeddings, l the stream before layer l, the last "
                  "after the last layer", "position in the prompts"),
        "attn": ("layer (its attention output, after W_O)", "position in the prompts"),
        "mlp": ("layer (its MLP output)", "position in the prompts"),
        "heads": ("layer", "head (its z at every position)"),
        "heads_pos": ("head of layer {layer} (its z)", "position in the prompts")}


@dataclass(frozen=True, eq=False)
class Patching:
    """The effect of every patch of one kind (``where``) from `clean` into `corrupted`.

    clean_ids, corrupted_ids (n,): the two prompts' tokens; answers (clean's, corrupted's)
    token ids; clean, corrupted: the metric (a logit difference) of each run unpatched.
    metric: the metric of each patched run, effect: normalised, 0 = corrupted, 1 = clean —
    (L + 1, n) for "resid", (L, n) for "attn" and "mlp", (L, H) for "heads", (H, n) for
    "heads_pos" of `layer`; NaN where not computed (``complete`` False: stopped early)."""

    where: str
    layer: int | None
    clean_ids: np.ndarray
    corrupted_ids: np.ndarray
    clean_tokens: list[str]
    corrupted_tokens: list[str]
    answers: tuple[int, int]
    answer_tokens: tuple[str, str]
    clean: float
    corrupted: float
    metric: np.ndarray = field(repr=False)
    effect: np.ndarray = field(repr=False)
    model: str = ""                                   # the model's name
    clean_prompt: str = ""                            # both prompts as text
    corrupted_prompt: str = ""

    @property
    def axes(self) -> tuple[str, str]:
        """What the rows and the columns of effect and metric are."""
        rows, columns = AXES[self.where]
        return rows.format(layer=self.layer), columns.format(layer=self.layer)

    @property
    def complete(self) -> bool:
        """Every patch computed (no NaN left)."""
        return not np.isnan(self.metric).any()

    @property
    def done(self) -> int:
        """How many patches are computed."""
        return int((~np.isnan(self.metric)).sum())

    def arrays(self) -> dict[str, np.ndarray]:
        """The result as arrays (``np.savez(file, **p.arrays())``, read back without pickle):
        effect, metric, both prompts' ids and tokens, the answers' ids and tokens, the
        unpatched metrics (clean, corrupted); what was patched (where, layer: −1 for none),
        the model, both prompts, and axes: what effect's rows and columns are."""
        return {"effect": np.asarray(self.effect), "metric": np.asarray(self.metric),
                "clean_ids": np.asarray(self.clean_ids),
                "corrupted_ids": np.asarray(self.corrupted_ids),
                "answers": np.asarray(self.answers),
                "clean_corrupted": np.array([self.clean, self.corrupted]),
                "clean_tokens": np.array(self.clean_tokens, dtype=str),
                "corrupted_tokens": np.array(self.corrupted_tokens, dtype=str),
                "answer_tokens": np.array(self.answer_tokens, dtype=str),
                "where": np.array(self.where), "model": np.array(self.model),
                "layer": np.array(-1 if self.layer is None else self.layer),
                "prompts": np.array([self.clean_prompt, self.corrupted_prompt], dtype=str),
                "axes": np.array(self.axes, dtype=str)}

    def to_json(self) -> str:
        """The result as JSON (NaN, not computed, as null): the model, where, layer, what the
        rows and columns are, both prompts, their tokens and ids, the answers, both runs'
        metrics, effect and metric, complete."""
        def listed(a: np.ndarray) -> list:
            return [[None if np.isnan(v) else float(v) for v in row] for row in a]

        rows, columns = self.axes
        return json.dumps({"model": self.model, "where": self.where, "layer": self.layer,
                "axes": {"rows": rows, "columns": columns},
                "clean_prompt": self.clean_prompt, "corrupted_prompt": self.corrupted_prompt,
                "clean_tokens": list(self.clean_tokens),
                "corrupted_tokens": list(self.corrupted_tokens),
                "clean_ids": [int(i) for i in self.clean_ids],
                "corrupted_ids": [int(i) for i in self.corrupted_ids],
                "answers": [int(a) for a in self.answers],
                "answer_tokens": list(self.answer_tokens),
                "clean": self.clean, "corrupted": self.corrupted,
                "effect": listed(self.effect), "metric": listed(self.metric),
                "complete": self.complete}, ensure_ascii=False)

    def top(self, k: int = 5) -> list[tuple[tuple[int, int], float]]:
        """The k entries with the largest |effect|, as ((row, column), effect)."""
        k = whole_number(k, "k", low=1, high=self.effect.size)
        flat = np.nan_to_num(np.abs(self.effect), nan=-1.0).ravel()
        best = np.argsort(-flat, kind="stable")[:k]
        return [(tuple(int(i) for i in np.unravel_index(b, self.effect.shape)),
                 float(self.effect.flat[b])) for b in best]


def patch(model, clean, corrupted, *, answers=None, where: str = "resid",
          layer: int | None = None, batch: int | None = None,
          progress: Callable[[int, int], None] | None = None,
          should_stop: Callable[[], bool] | None = None,
          resume: Patching | None = None) -> Patching:
    """Activation patching of `where` from `clean` into `corrupted` (texts or token ids of
    the same length) on a ``DecoderModel``; see the module's docstring.

    answers: (clean's, corrupted's) answer — token ids or texts of one token; None: each
    prompt's own most likely next token (the corrupted's second when both are the same).
    layer: the layer of "heads_pos" (only there). batch: patched runs side by side.
    progress(done, total) after each batch, in patches; should_stop() before each batch;
    resume: a partial result of the same patching, whose computed entries are kept."""
    where = _check_where(where)
    if (where == "heads_pos") != (layer is not None):
        raise AttnvizInputError("error.patch.layer", where=where)
    if layer is not None:
        layer = whole_number(layer, "layer", low=0, high=model.num_layers - 1)
    batch = BATCH if batch is None else whole_number(batch, "batch", low=1, high=4096)
    runs = _Runs(model, clean, corrupted, answers)
    shape = effect_shape(model, where, len(runs.clean_ids))
    metric = np.full(shape, np.nan)
    if resume is not None:
        _check_resume(resume, runs, where, layer)
        metric[...] = resume.metric
    todo = []
    for e in np.ndindex(*shape):
        if not np.isnan(metric[e]):
            continue
        start = layer if where == "heads_pos" else e[0]
        known = runs.known(where, start, _patch_of(where, e))
        if known is None:
            todo.append(e)
        else:
            metric[e] = known                       # one of the two runs itself, exactly
    total, done = metric.size, metric.size - len(todo)
    for start, entries in _by_layer(where, layer, todo):
        for i in range(0, len(entries), batch):
            if should_stop is not None and should_stop():
                return runs.result(where, layer, metric)
            chunk = entries[i:i + batch]
            values = runs.patched(where, start, [_patch_of(where, e) for e in chunk])
            for e, v in zip(chunk, values):
                metric[e] = v
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    return runs.result(where, layer, metric)


def patch_once(model, clean, corrupted, *, where: str, layer: int, position: int | None = None,
               head: int | None = None, answers=None) -> float:
    """The normalised effect of one patch: `where` ("resid", "attn", "mlp", "heads") at
    `layer`, at `position` (None: every position at once) and for "heads" of `head` alone.
    ``where="resid", layer=0`` with every position puts the whole clean input back: 1."""
    where = _check_where(where)
    if where == "heads_pos":
        where = "heads"
    runs = _Runs(model, clean, corrupted, answers)
    n, top = len(runs.clean_ids), model.num_layers + (where == "resid")
    layer = whole_number(layer, "layer", low=0, high=top - 1)
    positions = slice(None) if position is None else \
        whole_number(position, "position", low=0, high=n - 1)
    if where == "heads":
        head = whole_number(head, "head", low=0, high=model.num_heads - 1)
        target = (head, positions)
    else:
        target = positions
    metric = runs.known(where, layer, target)
    if metric is None:
        metric = runs.patched(where, layer, [target])[0]
    return float((metric - runs.corrupted) / (runs.clean - runs.corrupted))


# ---- the two runs and the patched ones ---------------------------------------------------------

class _Runs:
    """The clean and corrupted runs, what patching reads of them, and the patched runs.

    The prompts' first tokens up to the first that differs (positions < ``first``) give the
    same numbers in both runs at every layer (causal attention): they are computed once, their
    keys and values kept (``prefix``), and every run — clean, corrupted, patched — computes
    only positions first … n − 1 on top of them, the same way; a patch that is one of the two
    runs reads that run's metric (``known``)."""

    def __init__(self, model, clean, corrupted, answers):
        self.model = model
        self.clean_ids, self.corrupted_ids = text_ids(model, clean), text_ids(model, corrupted)
        n = len(self.clean_ids)
        if n != len(self.corrupted_ids):
            tokens = [" | ".join(model.labels(ids)[0]) for ids in
                      (self.clean_ids, self.corrupted_ids)]
            raise AttnvizInputError("error.patch.lengths", clean=n,
                                    corrupted=len(self.corrupted_ids),
                                    clean_tokens=tokens[0], corrupted_tokens=tokens[1])
        differ = np.flatnonzero(self.clean_ids != self.corrupted_ids)
        self.first = min(int(differ[0]) if differ.size else n, n - 1)
        self.prefix = KVCache(model.num_layers, model.num_kv_heads, n, model.d_k)
        if self.first:
            model.run_layers(model.token_embeddings(self.clean_ids[:self.first])[None],
                             cache=self.prefix)
            self.prefix.advance(self.first)
        self.clean_cache = self._suffix_run(self.clean_ids)
        self.corrupted_cache = self._suffix_run(self.corrupted_ids)
        self.answers = _answers(model, answers, self.clean_cache["final"],
                                self.corrupted_cache["final"])
        self.clean = self._metric(self.clean_cache["final"][None])[0]
        self.corrupted = self._metric(self.corrupted_cache["final"][None])[0]
        if not abs(self.clean - self.corrupted) > 0:
            raise AttnvizInputError("error.patch.same_metric", metric=f"{self.clean:.4g}")

    def _kv_cache(self, batch: int, source: KVCache, length: int) -> KVCache:
        """A cache for `batch` sequences holding the first `length` positions' keys and
        values of `source` (one sequence)."""
        m = self.model
        cache = KVCache(m.num_layers, m.num_kv_heads, len(self.clean_ids), m.d_k, batch)
        cache.k[:, :, :, :length] = source.k[:, :, :, :length]
        cache.v[:, :, :, :length] = source.v[:, :, :, :length]
        cache.advance(length)
        return cache

    def _suffix_run(self, ids: np.ndarray) -> dict:
        """One run of ids[first:] after the prefix, keeping what patching reads: resid_pre
        (L, n', d_model), attn_out and mlp_out (L, n', d_model), z (L, H, n', d_v), "final",
        the stream after the last layer (n', d_model), n' = n − first, and "kv", every
        position's keys and values."""
        kept: dict[str, list] = {"resid_pre": [], "attn_out": [], "mlp_out": [], "z": []}

        def read(layer: int, name: str, value: np.ndarray) -> None:
            if name in kept:
                kept[name].append(np.array(value[0], dtype=_DTYPE))    # a copy, batch dropped

        h = self.model.token_embeddings(ids[self.first:])[None]
        kv = self._kv_cache(1, self.prefix, self.first)
        final = self.model.run_layers(h, hook=read, cache=kv)[0]
        kv.advance(len(h[0]))
        cache = {name: np.stack(values) for name, values in kept.items()}
        cache["final"], cache["kv"] = final, kv
        return cache

    def _metric(self, h: np.ndarray) -> np.ndarray:
        """(B,) float64: logit(clean's answer) − logit(corrupted's) at the last position of
        each stream h (B, ·, d_model) after the last layer."""
        logits = self.model.token_logits(h[:, -1], self.answers)     # (B, 2)
        return logits[:, 0].astype(np.float64) - logits[:, 1]

    def _source(self, cache: dict, where: str, layer: int) -> np.ndarray:
        """What `where` patches at `layer` in one run's cache, positions first … n − 1:
        (n', d) or (H, n', d_v)."""
        if where == "resid":
            return cache["final"] if layer == self.model.num_layers else \
                cache["resid_pre"][layer]
        return cache[_POINT[where]][layer]

    def known(self, where: str, layer: int, target) -> float | None:
        """The metric of a patch that needs no run, exactly: the corrupted run's when it puts
        back what that run already has (``changes_nothing``), and for a residual patch the
        clean or the corrupted run's when it leaves the stream that run's own at every
        position read from there on (every position first … n − 1 before a layer: the whole
        clean input at layer 0 when one token differs; the last position after the last
        layer); else None.

        Exact by construction, not by arithmetic: a patched run computed in a batch may
        differ from the same run alone in the last bits (a BLAS kernel may sum a product's
        rows in another order in another batch), so a patch that is one of the two runs
        reads that run's metric instead of computing it again."""
        if self.changes_nothing(where, layer, target):
            return self.corrupted
        if where != "resid":
            return None
        clean = self._source(self.clean_cache, "resid", layer)            # (n', d)
        corrupted = self._source(self.corrupted_cache, "resid", layer)
        patched = corrupted.copy()
        local = _shifted(target, self.first)
        patched[local] = clean[local]
        read = slice(-1, None) if layer == self.model.num_layers else slice(None)
        for run, metric in ((clean, self.clean), (corrupted, self.corrupted)):
            if np.array_equal(patched[read], run[read]):
                return metric
        return None

    def changes_nothing(self, where: str, layer: int, target) -> bool:
        """True when the clean activation a patch puts back is the corrupted run's own, to
        the bit (at a position before the first token the prompts differ in, say): the
        patched run is the corrupted run and need not be computed."""
        position = target[1] if isinstance(target, tuple) else target
        if isinstance(position, int) and position < self.first:
            return True
        local = _shifted(target, self.first)
        return np.array_equal(self._source(self.clean_cache, where, layer)[local],
                              self._source(self.corrupted_cache, where, layer)[local])

    def patched(self, where: str, layer: int, targets: list) -> np.ndarray:
        """(len(targets),) the metric of each patch of `where` at `layer`: a target is a
        position (or slice) for "resid", "attn", "mlp", and (head, position or slice) for
        "heads" (all positions) and "heads_pos". A batch of positions only runs from the
        first of them on: the positions before are the corrupted run's (its keys and values);
        a position before `first` puts nothing back."""
        model, b, first = self.model, len(targets), self.first
        positions = [t[1] if isinstance(t, tuple) else t for t in targets]
        start = first if any(isinstance(p, slice) for p in positions) else \
            max(first, min(positions))
        source = self._source(self.clean_cache, where, layer)         # (n', d) | (H, n', d_v)
        kept = [t for t, p in zip(targets, positions) if isinstance(p, slice) or p >= first]
        chosen = [i for i, p in enumerate(positions) if isinstance(p, slice) or p >= first]
        if where == "resid" and layer == model.num_layers:
            h = np.repeat(self.corrupted_cache["final"][None], b, axis=0)   # (B, n', d)
            for i, t in zip(chosen, kept):
                h[i, _shifted(t, first)] = source[_shifted(t, first)]
            return self._metric(h)
        h = np.repeat(self._source(self.corrupted_cache, "resid", layer)[None, start - first:],
                      b, axis=0)                                       # (B, n − start, d)
        if where == "resid":
            for i, t in zip(chosen, kept):
                h[i, _shifted(t, start)] = source[_shifted(t, first)]
            hook = None
        else:
            point = _POINT[where]

            def hook(at: int, name: str, value: np.ndarray):
                if at != layer or name != point:
                    return None
                new = value.copy()
                for i, t in zip(chosen, kept):
                    local = _shifted(t, start)
                    new[(i,) + (local if isinstance(local, tuple) else (local,))] = \
                        source[_shifted(t, first)]
                return new

        cache = self._kv_cache(b, self.corrupted_cache["kv"], start)
        return self._metric(model.run_layers(h, layer, hook=hook, cache=cache))

    def result(self, where: str, layer: int | None, metric: np.ndarray) -> Patching:
        effect = (metric - self.corrupted) / (self.clean - self.corrupted)
        labels = self.model.labels
        pieces = tuple(self.model.piece_after(self.clean_ids if i == 0 else self.corrupted_ids,
                                              a) for i, a in enumerate(self.answers))
        return Patching(where=where, layer=layer, clean_ids=readonly(self.clean_ids),
                        corrupted_ids=readonly(self.corrupted_ids),
                        clean_tokens=labels(self.clean_ids)[0],
                        corrupted_tokens=labels(self.corrupted_ids)[0],
                        answers=self.answers, answer_tokens=pieces, clean=float(self.clean),
                        corrupted=float(self.corrupted), metric=readonly(metric.copy()),
                        effect=readonly(effect), model=getattr(self.model, "model_name", ""),
                        clean_prompt=self.model.decode(self.clean_ids),
                        corrupted_prompt=self.model.decode(self.corrupted_ids))


def _shifted(target, start: int):
    """A target's positions counted from `start` (a slice: every position from `start`)."""
    if isinstance(target, tuple):
        return (target[0], _shifted(target[1], start))
    return slice(None) if isinstance(target, slice) else target - start


# ---- the entries ---------------------------------------------------------------------------------

def effect_shape(model, where: str, n: int) -> tuple[int, int]:
    """The shape of `where`'s effect (and metric) for prompts of n tokens."""
    layers, heads = model.num_layers, model.num_heads
    return {"resid": (layers + 1, n), "attn": (layers, n), "mlp": (layers, n),
            "heads": (layers, heads), "heads_pos": (heads, n)}[where]


def patch_work(model, where: str, clean_ids, corrupted_ids) -> tuple[int, int]:
    """(patches, tokens) a patching of `where` runs for these prompts (ids of the same
    length): the patches at a position before the first token the prompts differ in are not
    run (they change nothing), and each patch computes the tokens from that first difference
    on (the shared first tokens are computed once). Their product bounds the work: the tokens
    the patched forward passes compute, each through the layers from the patched one on."""
    clean_ids, corrupted_ids = np.asarray(clean_ids), np.asarray(corrupted_ids)
    n = len(clean_ids)
    differ = np.flatnonzero(clean_ids != corrupted_ids)
    first = min(int(differ[0]) if differ.size else n, n - 1)
    rows, columns = effect_shape(model, _check_where(where), n)
    patches = rows * columns if where == "heads" else rows * (n - first)
    return patches, n - first


def _by_layer(where: str, layer: int | None, todo: list) -> list[tuple[int, list]]:
    """The entries to compute grouped by the layer their runs start at, first layer first."""
    groups: dict[int, list] = {}
    for e in todo:
        groups.setdefault(layer if where == "heads_pos" else e[0], []).append(e)
    # by position: a batch runs from its first position on
    return [(start, sorted(entries, key=lambda e: (e[1], e[0])))
            for start, entries in sorted(groups.items())]


def _patch_of(where: str, entry: tuple[int, int]):
    """The target ``_Runs.patched`` takes for an entry of the effect array."""
    if where == "heads":
        return (entry[1], slice(None))                                 # (head, every position)
    if where == "heads_pos":
        return (entry[0], entry[1])                                    # (head, position)
    return entry[1]                                                    # a position


# ---- checks ----------------------------------------------------------------------------------------

def _check_where(where) -> str:
    if where not in WHERE:
        raise AttnvizInputError("error.patch.where", where=str(where), names=", ".join(WHERE))
    return where


def _check_resume(resume, runs: _Runs, where: str, layer: int | None) -> None:
    same = isinstance(resume, Patching) and resume.where == where and resume.layer == layer \
        and np.array_equal(resume.clean_ids, runs.clean_ids) \
        and np.array_equal(resume.corrupted_ids, runs.corrupted_ids) \
        and tuple(resume.answers) == tuple(runs.answers)
    if not same:
        raise AttnvizInputError("error.patch.resume")


def _answers(model, answers, clean_final: np.ndarray, corrupted_final: np.ndarray
             ) -> tuple[int, int]:
    """(clean's, corrupted's) answer ids: given, or each prompt's own top next token."""
    if answers is None:
        clean_logits = model.unembed(clean_final[-1])                  # (vocab,)
        corrupted_logits = model.unembed(corrupted_final[-1])
        a = int(np.argmax(clean_logits))
        ranked = np.argsort(-corrupted_logits, kind="stable")
        b = int(ranked[0]) if int(ranked[0]) != a else int(ranked[1])
        return a, b
    if isinstance(answers, str) or len(answers) != 2:
        raise AttnvizInputError("error.patch.answers")
    a, b = (token_id(model, x, answer=True) for x in answers)
    if a == b:
        raise AttnvizInputError("error.patch.same_answers", answer=model.piece_text(a))
    return a, b
