"""The logit lens (nostalgebraist 2020) on SmolLM2: the residual stream at every layer boundary
read as if it were the last one.

    h_0 = E[ids]                                       the embeddings (ℓ = 0)
    h_ℓ = the stream after layer ℓ − 1 … after the last (ℓ = L)
    m_ℓ = h_ℓ + Attention_ℓ(h_ℓ)                       after layer ℓ's attention (sublayers=True)
    lens(h) = softmax(RMSNorm(h) · g_final @ Eᵀ)       each row normed with ITS OWN mean square

Each row is normed with its own statistics (``DecoderModel.unembed``): reusing the final
layer's (TransformerLens #1076) flattens the early rows into near-uniform distributions. The
last row is the model's own next-token distribution: the same numbers as ``run(text).logits``.

One forward pass (``DecoderModel.run_layers`` with a reading hook) collects the streams; they
are projected to the vocabulary ~256 (row, position) pairs at a time — one matrix product reads
the 113 MB unembedding once for all of them — and reduced, 8 rows at a time while they are in
the CPU's cache, to what a page shows: the top-k tokens and probabilities (among the k
vocabulary blocks with the largest maxima, ``_top_k``), a target token's probability and rank,
KL(final ‖ row). So 61 rows of a 64-token text never hold their ~770 MB of probabilities at
once. The streams
(rows, n, d_model) are kept: ``logits(row)``, ``prob(token)`` and ``rank(token)`` project
them again on demand. ``positions=`` projects only some positions (Generate reads the one that
chooses the next token): the pass still runs over the whole text, the projections, the
reductions and the streams kept are those positions' only.

Given a run (``DecoderModel.run``) in place of a text, the lens reads the streams the run
kept (``hidden_states``: the same numbers as the pass, to the bit) and, where the run has them,
its logits (the last row's product, the same call): no pass over the text again. ``first=``
draws the answer before the rest: the last column (where the text's next token is chosen)
is projected right after the last row and handed to `first`, then the other columns — each
(row, position) projected once, the whole lens's last column the one handed over.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from attnviz.core.arrays import readonly, whole_number
from attnviz.core.errors import AttnvizInputError

__all__ = ["LAYER", "ATTENTION", "LogitLens", "layer_streams", "logit_lens", "logsumexp_rows",
           "text_ids", "token_id", "top_k"]

LAYER = "layer"            # ("layer", ℓ): the stream after ℓ layers (0: the embeddings)
ATTENTION = "attention"    # ("attention", ℓ): after layer ℓ's attention, before its MLP
_DTYPE = np.float32
_CHUNK = 256               # (row, position) pairs unembedded in one matrix product
_SLICE = 8                 # rows reduced at a time: (8, 49,152) float32 is 1.5 MB, in cache
_BLOCK = 256               # the top-k's vocabulary blocks: 49,152 = 192 × 256


@dataclass(frozen=True, eq=False)
class LogitLens:
    """The lens of one text: R rows (layer boundaries, and with sublayers the residual after
    each attention sublayer, in the order the model computes them), n positions, k tokens.

    rows: R pairs, ("layer", ℓ) for ℓ = 0 … L and ("attention", ℓ) for ℓ = 0 … L − 1 between
    ("layer", ℓ) and ("layer", ℓ + 1); the last row is ("layer", L), the model's output.
    ids (N,) and tokens (N,): the text read. positions (n,): the positions projected, one per
    column of every array below (all N, 0 … N − 1, unless ``logit_lens`` was given some).
    top_ids (R, n, k) int, top_probs (R, n, k) float32: the k most likely next tokens read at
    that row and position, most likely first. target (n,): the token followed at each position
    (default: the last row's top token); target_prob (R, n) float32, target_rank (R, n) int
    (1 = the most likely). kl (R, n) float32: KL(last row ‖ row) in nats, 0 on the last row.
    residuals (R, n, d_model) float32: the streams read (with ``tuned``, each moved by its
    layer's translator first: the tuned lens, ``attnviz.models.readers.tuned_lens``).
    """

    ids: np.ndarray
    tokens: list[str]
    rows: tuple[tuple[str, int], ...]
    top_ids: np.ndarray = field(repr=False)
    top_probs: np.ndarray = field(repr=False)
    target: np.ndarray = field(repr=False)
    target_prob: np.ndarray = field(repr=False)
    target_rank: np.ndarray = field(repr=False)
    kl: np.ndarray = field(repr=False)
    residuals: np.ndarray = field(repr=False)
    _model: object = field(repr=False)
    positions: np.ndarray = field(default=None, repr=False)
    tuned: bool = False

    def __post_init__(self) -> None:
        if self.positions is None:                                    # every position
            object.__setattr__(self, "positions", readonly(np.arange(len(self.ids))))

    def last_column(self, k: int | None = None) -> LogitLens:
        """The lens of the last position alone (every row), each cell's k most likely tokens
        the first k of this lens's (every one when None): the same numbers. A lens computed
        with ``first`` made that column as a lens of the last position alone makes it
        (``positions=[-1]``: the same products, to the bit)."""
        kept = self.top_ids.shape[-1]
        k = kept if k is None else whole_number(k, "k", low=1, high=kept)
        last = slice(len(self.positions) - 1, None)

        def cut(a: np.ndarray) -> np.ndarray:
            return readonly(np.array(a[:, last, :k] if a.ndim == 3 and a is not self.residuals
                                     else a[:, last]))

        return replace(self, top_ids=cut(self.top_ids), top_probs=cut(self.top_probs),
                       target=readonly(np.array(self.target[last])),
                       target_prob=cut(self.target_prob), target_rank=cut(self.target_rank),
                       kl=cut(self.kl), residuals=cut(self.residuals),
                       positions=readonly(np.array(self.positions[last])))

    @property
    def layer_rows(self) -> np.ndarray:
        """(L + 1,) the indices of the ("layer", ℓ) rows, ℓ = 0 … L."""
        return np.array([i for i, (kind, _) in enumerate(self.rows) if kind == LAYER])

    def row(self, kind: str, layer: int) -> int:
        """The index of row (kind, layer): ``row("layer", 0)`` is the embeddings' row."""
        try:
            return self.rows.index((kind, int(layer)))
        except ValueError:
            raise AttnvizInputError("error.lens.row", kind=kind, layer=layer) from None

    @property
    def top_tokens(self) -> list[list[list[str]]]:
        """(R, n, k) readable tokens of ``top_ids``, each read after the text up to its
        position (a byte ending a character shows that character: ``piece_after``)."""
        m = self._model
        return [[[m.piece_after(self.ids[:int(i) + 1], int(j)) for j in cell]
                 for i, cell in zip(self.positions, row)] for row in self.top_ids]

    def logits(self, row: int) -> np.ndarray:
        """(n, vocab) float32: row `row`'s stream through the final RMSNorm (its own
        statistics) and Eᵀ."""
        row = whole_number(row, "row", low=-len(self.rows), high=len(self.rows) - 1)
        return self._model.unembed(self.residuals[row])

    def prob(self, token) -> np.ndarray:
        """(R, n) float32: the probability of `token` (an id, or a text of one token) at every
        row and position."""
        return self._per_token(token)[0]

    def rank(self, token) -> np.ndarray:
        """(R, n) int: the rank of `token` (1 = the most likely) at every row and position."""
        return self._per_token(token)[1]

    def _per_token(self, token) -> tuple[np.ndarray, np.ndarray]:
        """The rows projected as ``logit_lens`` projects them (the same products): a token's
        probability and rank here are the lens's own target_prob and target_rank for it."""
        target = np.full(len(self.positions), token_id(self._model, token))
        probs = np.empty(self.kl.shape, _DTYPE)
        ranks = np.empty(self.kl.shape, np.int64)
        for rows, _, logits in _projected(self._model, self.residuals):
            for r in range(rows.start, rows.stop):
                _, _, lse, chosen, ranks[r], _ = _reduce(logits[r - rows.start], target, 1,
                                                         None)
                probs[r] = np.exp(chosen - lse)
        return readonly(probs), readonly(ranks)


def logit_lens(model, ids_or_text, *, sublayers: bool = False, target=None, k: int = 10,
               max_tokens: int | None = None, positions=None, tuned=None,
               first: Callable[[LogitLens], None] | None = None) -> LogitLens:
    """The logit lens of a text (or token ids, or a ``DecoderRun`` of this model: its streams
    and logits read, not computed again) on a ``DecoderModel``.

    sublayers: also the stream after each attention sublayer (resid_mid), between the layer
    boundaries. target: None (each position's top token in the last row), a token id or a
    text of one token (the same at every position), or (N,) ids (one per position of the
    text). k: how many top tokens each cell keeps (1 … vocab). max_tokens: read at most this
    many tokens (None: the model's limit, 512; with `positions`, up to
    ``model.generation_tokens``, 768: a generation's prompt and new tokens, whose every step
    Generate reads at the position choosing the next token). positions: None (every position, 0 … N − 1),
    or the positions to project (a list or array of whole numbers, −N … N − 1, a negative one
    counted from the end): the lens's arrays then have one column per position given, in that
    order, and ``LogitLens.positions`` says which — those columns of the whole lens (up to
    float32 rounding: their products have other rows), for one pass over the text and the
    projections of those positions only.
    tuned: None (the logit lens), or a ``TunedLens`` whose translators move each layer
    boundary's stream before it is read (the tuned lens; not with `sublayers`).
    first: None, or a function called once, when the lens has more than one column, with the
    lens of its last column alone (every row; ``positions`` that one), as soon as that column
    is projected and before the others are: the whole lens's last column, the same numbers."""
    run = ids_or_text if hasattr(ids_or_text, "hidden_states") else None
    ids = text_ids(model, ids_or_text if run is None else run.ids)
    most = model.max_tokens if positions is None else model.generation_tokens
    limit = model.max_tokens if max_tokens is None else \
        whole_number(max_tokens, "max_tokens", low=1, high=most)
    ids = ids[:limit]
    k = whole_number(k, "k", low=1, high=model.vocab_size)
    chosen = _positions(positions, len(ids))                           # (n,)
    if tuned is not None and sublayers:
        raise AttnvizInputError("error.lens.tuned_sublayers")
    if run is not None and not sublayers:      # the run's streams: the pass's, to the bit
        rows = [(LAYER, layer) for layer in range(len(run.hidden_states))]
        residuals = np.array(run.hidden_states[:, :len(ids)][:, chosen], dtype=_DTYPE)
    else:
        rows, residuals = _streams(model, ids, sublayers, chosen)      # (R, n, d_model)
    if tuned is not None:                     # each row moved by its layer's translator
        residuals = np.stack([tuned.translate(layer, h) for (_, layer), h in
                              zip(rows, residuals)])
    shape = (len(rows), len(chosen))
    top_ids, top_probs = np.empty(shape + (k,), np.int64), np.empty(shape + (k,), _DTYPE)
    target_prob, target_rank = np.empty(shape, _DTYPE), np.empty(shape, np.int64)
    kl = np.zeros(shape, _DTYPE)                                       # the last row: 0
    final = _Final(len(chosen), model.vocab_size)   # the model's own distribution: KL reads it
    column_first = first is not None and len(chosen) > 1
    known = None if run is None or tuned is not None else _run_logits(run, ids, chosen,
                                                                       column_first)
    for block, cols, logits in _projected(model, residuals, column_first, known):
        if block.stop == len(rows):                 # the last row's block comes first
            final.add(cols, logits[-1], model, target, len(ids), chosen[cols])
        for r in range(block.start, block.stop):
            last = r == len(rows) - 1
            top_ids[r, cols], top_logits, lse, chosen_logit, target_rank[r, cols], dot = \
                _reduce(logits[r - block.start], final.targets[cols], k,
                        None if last else final.p[cols])
            top_probs[r, cols] = np.exp(top_logits - lse[:, None])
            target_prob[r, cols] = np.exp(chosen_logit - lse)
            if not last:
                # KL(final ‖ row) = Σ p log p − Σ p (logits_row − lse_row)   (Σ p = 1): no
                # (n, vocab) log-probabilities of the row, only its log-sum-exp and one dot
                kl[r, cols] = np.maximum(final.neg_entropy[cols] - dot + lse, 0)
        del logits
        column = slice(len(chosen) - 1, len(chosen))
        if column_first and cols == column and block.start == 0:      # the last column whole
            first(_made(model, ids, rows, final.targets, chosen, tuned, column, top_ids,
                        top_probs, target_prob, target_rank, kl, residuals))
    return _made(model, ids, rows, final.targets, chosen, tuned, slice(None), top_ids,
                 top_probs, target_prob, target_rank, kl, residuals)


def _made(model, ids, rows, targets, chosen, tuned, columns: slice, *arrays) -> LogitLens:
    """The lens of `columns` of the arrays (top ids, top probabilities, target probability
    and rank, KL, streams), checked finite (what the page writes: numbers), each its own
    read-only copy."""
    top_ids, top_probs, target_prob, target_rank, kl, residuals = (
        readonly(np.array(a[:, columns])) for a in arrays)
    model.check_logits_finite(top_probs, target_prob, kl)
    tokens, _, _ = model.labels(ids)
    return LogitLens(ids=readonly(ids), tokens=tokens, rows=tuple(rows), top_ids=top_ids,
                     top_probs=top_probs, target=readonly(np.array(targets[columns])),
                     target_prob=target_prob, target_rank=target_rank, kl=kl,
                     residuals=residuals, _model=model,
                     positions=readonly(np.array(chosen[columns])), tuned=tuned is not None)


def _run_logits(run, ids: np.ndarray, chosen: np.ndarray, column_first: bool):
    """The last row's logits a run has made, or makes and keeps, for the lens's first block
    (``_blocks``) — its ``logits`` (every position) or ``next_logits`` (the last alone) —:
    the product the lens would make (``unembed`` of the same rows: the same call, the same
    numbers); else None (the lens makes its own)."""
    n = len(ids)
    if n != len(run.ids):
        return None
    if (len(chosen) == 1 or column_first) and chosen[-1] == n - 1:
        return run.next_logits[None]
    if len(chosen) == n and (chosen == np.arange(n)).all():
        return run.logits
    return None


def logsumexp_rows(logits: np.ndarray) -> np.ndarray:
    """(n, vocab) float32 → (n,) float64: log Σ exp over each row (the softmax's normaliser)."""
    return _reduce(logits, np.zeros(len(logits), np.intp), 1, None)[2]


# ---- pieces -------------------------------------------------------------------------------------

def _positions(positions, n: int) -> np.ndarray:
    """(m,) the positions a lens projects, each 0 … n − 1: every one when None."""
    if positions is None:
        return np.arange(n)
    given = np.asarray(positions, dtype=object)
    if given.ndim != 1 or given.size == 0:
        raise AttnvizInputError("error.lens.positions", shape=str(given.shape), tokens=n)
    return np.array([whole_number(p, "positions", low=-n, high=n - 1) % n for p in given],
                    dtype=np.intp)


def _streams(model, ids: np.ndarray, sublayers: bool, positions: np.ndarray):
    """The rows' labels and streams (R, m, d_model) at `positions`: one pass over every
    token, a hook reading resid_post (and resid_mid)."""
    h0 = model.token_embeddings(ids)                                              # (n, d_model)
    rows, streams = [(LAYER, 0)], [h0[positions]]
    wanted = ("resid_mid", "resid_post") if sublayers else ("resid_post",)

    def read(layer: int, name: str, value: np.ndarray) -> None:
        if name in wanted:
            rows.append((ATTENTION, layer) if name == "resid_mid" else (LAYER, layer + 1))
            streams.append(np.array(value[0][positions], dtype=_DTYPE))   # (m, d_model)

    model.run_layers(h0, hook=read)
    return rows, np.stack(streams)


def layer_streams(model, ids: np.ndarray) -> np.ndarray:
    """(L + 1, n, d_model) float32: the stream at every layer boundary of every position of
    `ids` (n,), the embeddings first (the tuned lens's training data)."""
    return _streams(model, ids, False, np.arange(len(ids)))[1]


def text_ids(model, ids_or_text) -> np.ndarray:
    """(n,) token ids: a text as the model reads it (``encode``), or ids checked (a non-empty
    1-D array of integers in the vocabulary); the lens's and activation patching's input."""
    if isinstance(ids_or_text, str):
        return model.encode(ids_or_text)
    ids = np.asarray(ids_or_text)
    if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer) or \
            ids.min() < 0 or ids.max() >= model.vocab_size:
        raise AttnvizInputError("error.layer.ids", high=model.vocab_size - 1,
                                shape=str(ids.shape))
    return ids.astype(np.intp)


def token_id(model, token, *, answer: bool = False) -> int:
    """A token id (checked in the vocabulary), or the one token a text is read as: the lens's
    target, or with `answer` an activation patching answer (each with its own error ids). A
    text is read without the BOS the model's tokenizer puts before a whole text (Gemma's): " Paris"
    is one token."""
    if isinstance(token, str):
        ids = model.encode(token, bos=False)
        if len(ids) != 1 and answer:
            raise AttnvizInputError("error.patch.answer_tokens", text=token, count=len(ids))
        if len(ids) != 1:
            raise AttnvizInputError("error.lens.not_one_token", text=token, count=len(ids))
        return int(ids[0])
    return whole_number(token, "answer" if answer else "token", low=0,
                        high=model.vocab_size - 1)


def _targets(model, target, final_logits: np.ndarray, n: int,
             positions: np.ndarray) -> np.ndarray:
    """(m,) the token followed at each position projected (`target`: one per token of the
    text, n)."""
    if target is None:
        return np.argmax(final_logits, axis=-1)
    if isinstance(target, str) or np.ndim(target) == 0:
        return np.full(len(positions), token_id(model, target))
    targets = np.asarray(target)
    if targets.shape != (n,):
        raise AttnvizInputError("error.lens.target_shape", tokens=n, shape=str(targets.shape))
    return np.array([token_id(model, int(i)) for i in targets[positions]])


class _Final:
    """The last row's distribution at each position, which every other row's KL compares
    against: p (m, vocab) float32, Σ p log p (m,) float64, and the targets (m,), filled
    column by column as the last row's blocks come (``add``)."""

    def __init__(self, m: int, vocab: int):
        self.targets = np.empty(m, np.int64)
        self.p = np.empty((m, vocab), _DTYPE)
        self.neg_entropy = np.empty(m)

    def add(self, cols: slice, logits: np.ndarray, model, target, n: int,
            positions: np.ndarray) -> None:
        """The last row's logits (c, vocab) at the columns `cols` (`positions`: theirs)."""
        self.targets[cols] = _targets(model, target, logits, n, positions)
        lse = logsumexp_rows(logits)                                   # (c,)
        p = self.p[cols]
        np.exp(logits - lse[:, None].astype(_DTYPE), out=p)
        self.neg_entropy[cols] = np.einsum("iv,iv->i", p, logits).astype(np.float64) - lse


def _blocks(rows: int, n: int, column_first: bool = False):
    """(rows, columns) slices of the lens unembedded in one matrix product, the last row's
    first at any column: the last row alone first, then ~_CHUNK (row, position) pairs each.
    One product of many rows reads Eᵀ (113 MB) once where 31 products of 64 rows read it 31
    times: 2.4 x faster on one BLAS thread here. The last row alone is the product ``run``
    makes, so its numbers are the model's output to the bit (a row of a larger product may
    differ from it in the last bits: a BLAS kernel may sum another batch's rows in another
    order). With `column_first`, the last column comes whole before the others: its last row
    alone (the one-row product of ``DecoderRun.next_logits``, the model's next token), its
    other rows in one product; then the other columns' rows, the last row in the first chunk
    (a product's fixed cost — BLAS packs the whole of Eᵀ, ~0.14 s of Gemma 3's 671 MB —
    paid once more than without, not twice)."""
    if column_first and rows > 1 and n > 1:
        yield slice(rows - 1, rows), slice(n - 1, n)
        yield slice(0, rows - 1), slice(n - 1, n)
        n, top = n - 1, rows                 # the chunks hold rows 0 … top − 1, as even as
        most = max(1, (_CHUNK + _CHUNK // 8) // n)          # can be: 19 × 14 pairs in one
        per = min(most, -(-top // -(-top // most)))
    else:
        yield slice(rows - 1, rows), slice(0, n)
        top, per = rows - 1, max(1, _CHUNK // n)
    for stop in range(top, 0, -per):
        yield slice(max(0, stop - per), stop), slice(0, n)


def _projected(model, residuals: np.ndarray, column_first: bool = False,
               known: np.ndarray | None = None):
    """(rows, columns, logits (rows, columns, vocab)) of the streams (R, n, d_model), block by
    block (``_blocks``): those rows and columns through the final RMSNorm and Eᵀ. The first
    block's logits are `known` when given (a run's: the same product)."""
    for i, (rows, cols) in enumerate(_blocks(*residuals.shape[:2], column_first)):
        if i == 0 and known is not None:
            yield rows, cols, known[None]
            continue
        block = residuals[rows, cols]                                  # (rows, n, d_model)
        yield rows, cols, model.unembed(block.reshape(-1, block.shape[-1])).reshape(
            block.shape[:2] + (-1,))


def _reduce(logits: np.ndarray, targets: np.ndarray, k: int, p_final):
    """Each row of logits (n, vocab) reduced to what the lens keeps, a few rows at a time
    (_SLICE, so that every pass over them reads the CPU's cache, not memory):
    top ids (n, k) and their logits (n, k) float64, the log-sum-exp (n,) float64, the target's
    logit (n,) float64 and rank (n,) int (1 + how many tokens score higher), and with
    `p_final` (n, vocab) Σ p_final · logits (n,) float64 (else None)."""
    n, vocab = logits.shape
    top_ids, top_logits = np.empty((n, k), np.int64), np.empty((n, k), np.float64)
    lse, rank = np.empty(n), np.empty(n, np.int64)
    chosen = logits[np.arange(n), targets]                             # (n,)
    dot = None if p_final is None else np.empty(n)
    buffer = np.empty((min(_SLICE, n), vocab), _DTYPE)
    for start in range(0, n, _SLICE):
        x = logits[start:start + _SLICE]                               # (s, vocab)
        part = slice(start, start + len(x))
        top_ids[part], top_logits[part], peak = _top_k(x, k)
        rank[part] = 1 + np.count_nonzero(x > chosen[part, None], axis=-1)
        if p_final is not None:
            dot[part] = np.einsum("iv,iv->i", p_final[part], x)
        shifted = np.subtract(x, peak[:, None], out=buffer[:len(x)])
        np.exp(shifted, out=shifted)
        lse[part] = peak.astype(np.float64) + np.log(shifted.sum(axis=-1).astype(np.float64))
    return top_ids, top_logits, lse, chosen.astype(np.float64), rank, dot


def top_k(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(s, k) ids and (s, k) float64 values of the k largest in each row of x (s, vocab), the
    largest first, ties the lower id (``_top_k``: among the vocabulary blocks of the largest)."""
    return _top_k(x, k)[:2]


def _top_k(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s, k) ids and logits of the k largest in each row of x (s, vocab), the largest first
    (ties: the lower id), and (s,) each row's largest.

    The vocabulary is cut into blocks of _BLOCK tokens (every blocks-th id: the maxima of a
    (B, blocks) view are B − 1 vectorised comparisons of rows): the k largest logits lie in the k blocks
    with the largest maxima (each of those maxima is a logit at least the k-th largest
    maximum), unless maxima tie at the k-th: so the k are chosen among k · _BLOCK candidates,
    not the whole vocabulary, and a row with a tie there is sorted whole."""
    s, vocab = x.shape
    if vocab % _BLOCK or 4 * k > vocab // _BLOCK:                      # k large: every token
        ids = np.broadcast_to(np.arange(vocab), x.shape)
        return _best(x, ids, x, k) + (x.max(axis=-1),)
    tiles = x.reshape(s, _BLOCK, -1)          # (s, B, blocks): block b holds ids j·blocks + b
    peaks = tiles.max(axis=1)                                          # (s, blocks)
    blocks = np.argpartition(peaks, -k, axis=-1)[:, -k:]               # (s, k)
    ids = (np.arange(_BLOCK)[:, None] * peaks.shape[-1] + blocks[:, None, :]).reshape(s, -1)
    rows = np.arange(s)[:, None] * vocab                               # (s, 1)
    candidates = np.take(x, ids + rows)                                # (s, k·B)
    best_ids, best_logits = _best(candidates, ids, x, k)
    kth = np.take_along_axis(peaks, blocks, axis=-1).min(axis=-1)      # (s,)
    for i in np.flatnonzero(np.count_nonzero(peaks >= kth[:, None], axis=-1) > k):
        best_ids[i], best_logits[i] = _sorted_whole(x[i], k)           # maxima tie
    return best_ids, best_logits, peaks.max(axis=-1)


def _best(values: np.ndarray, ids: np.ndarray, x: np.ndarray, k: int):
    """The k largest of `values` (s, c), whose tokens are `ids` (s, c), the largest first
    (ties: the lower id); a row whose k-th largest ties with one left out is sorted whole
    (x (s, vocab), its row)."""
    c = values.shape[-1]
    pick = np.argpartition(values, c - k, axis=-1)[:, c - k:]          # (s, k)
    picked, picked_ids = (np.take_along_axis(a, pick, axis=-1) for a in (values, ids))
    order = np.lexsort((picked_ids, -picked), axis=-1)
    best_ids = np.take_along_axis(picked_ids, order, axis=-1).astype(np.int64)
    best = np.take_along_axis(picked, order, axis=-1).astype(np.float64)
    tied = np.count_nonzero(values >= best[:, -1:].astype(values.dtype), axis=-1) > k
    for i in np.flatnonzero(tied):
        best_ids[i], best[i] = _sorted_whole(x[i], k)
    return best_ids, best


def _sorted_whole(row: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest of one row (vocab,) by a whole sort: largest first, ties the lower id."""
    order = np.lexsort((np.arange(len(row)), -row))[:k]
    return order, row[order].astype(np.float64)
