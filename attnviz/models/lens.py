"""The logit lens (nostalgebraist 2020) on SmolLM2: the residual stream at every layer boundary
read as if it were the last one.

    h_0 = E[ids]                                       the embeddings (ℓ = 0)
    h_ℓ = the stream after layer ℓ − 1 … after the last (ℓ = L)
    m_ℓ = h_ℓ + Attention_ℓ(h_ℓ)                       after layer ℓ's attention (sublayers=True)
    lens(h) = softmax(RMSNorm(h) · g_final @ Eᵀ)       each row normed with ITS OWN mean square

Each row is normed with its own statistics (``DecoderModel.unembed``): reusing the final
layer's (TransformerLens #1076) flattens the early rows into near-uniform distributions. The
last row is the model's own next-token distribution: the same numbers as ``run(text).logits``.

One forward pass (``DecoderModel.run_layers`` with a reading hook) collects the streams; each
row is then projected to the vocabulary (n, 49,152) once and reduced to what a page shows —
the top-k tokens and probabilities, a target token's probability and rank, KL(final ‖ row) —
so 61 rows of a 64-token text never hold their ~770 MB of probabilities at once. The streams
(rows, n, d_model) are kept: ``logits(row)``, ``prob(token)`` and ``rank(token)`` project
them again on demand. ``positions=`` projects only some positions (Generate reads the one that
chooses the next token): the pass still runs over the whole text, the projections, the
reductions and the streams kept are those positions' only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attnviz.core.arrays import readonly, whole_number
from attnviz.core.errors import AttnvizInputError

__all__ = ["LAYER", "ATTENTION", "LogitLens", "logit_lens", "logsumexp_rows", "text_ids",
           "token_id"]

LAYER = "layer"            # ("layer", ℓ): the stream after ℓ layers (0: the embeddings)
ATTENTION = "attention"    # ("attention", ℓ): after layer ℓ's attention, before its MLP
_DTYPE = np.float32


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
    residuals (R, n, d_model) float32: the streams read.
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

    def __post_init__(self) -> None:
        if self.positions is None:                                    # every position
            object.__setattr__(self, "positions", readonly(np.arange(len(self.ids))))

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
        target = np.full(len(self.positions), token_id(self._model, token))
        probs = np.empty(self.kl.shape, _DTYPE)
        ranks = np.empty(self.kl.shape, np.int64)
        for r in range(len(self.rows)):
            logits = self.logits(r)                                    # (n, vocab)
            probs[r], ranks[r] = _target_of(logits, logsumexp_rows(logits), target)
        return readonly(probs), readonly(ranks)


def logit_lens(model, ids_or_text, *, sublayers: bool = False, target=None, k: int = 10,
               max_tokens: int | None = None, positions=None) -> LogitLens:
    """The logit lens of a text (or token ids) on a ``DecoderModel``.

    sublayers: also the stream after each attention sublayer (resid_mid), between the layer
    boundaries. target: None (each position's top token in the last row), a token id or a
    text of one token (the same at every position), or (N,) ids (one per position of the
    text). k: how many top tokens each cell keeps (1 … vocab). max_tokens: read at most this
    many tokens (None: the model's limit, 512; with `positions`, up to
    ``model.generation_tokens``, 768: a generation's prompt and new tokens, whose every step
    Generate reads at the position choosing the next token). positions: None (every position, 0 … N − 1),
    or the positions to project (a list or array of whole numbers, −N … N − 1, a negative one
    counted from the end): the lens's arrays then have one column per position given, in that
    order, and ``LogitLens.positions`` says which — the same numbers as those columns of the
    whole lens, for one pass over the text and the projections of those positions only."""
    ids = text_ids(model, ids_or_text)
    most = model.max_tokens if positions is None else model.generation_tokens
    limit = model.max_tokens if max_tokens is None else \
        whole_number(max_tokens, "max_tokens", low=1, high=most)
    ids = ids[:limit]
    k = whole_number(k, "k", low=1, high=model.vocab_size)
    chosen = _positions(positions, len(ids))                           # (n,)
    rows, residuals = _streams(model, ids, sublayers, chosen)          # (R, n, d_model)
    final_logits = model.unembed(residuals[-1])                        # (n, vocab)
    final_lse = logsumexp_rows(final_logits)                           # (n,)
    targets = _targets(model, target, final_logits, len(ids), chosen)
    p_final = np.exp(final_logits - final_lse[:, None].astype(_DTYPE))  # (n, vocab)
    # KL(final ‖ row) = Σ p log p − Σ p (logits_row − lse_row)   (Σ p = 1): no (n, vocab)
    # log-probabilities of the row are needed, only its log-sum-exp and one dot product
    neg_entropy = np.einsum("iv,iv->i", p_final, final_logits).astype(np.float64) - final_lse
    shape = (len(rows), len(chosen))
    top_ids, top_probs = np.empty(shape + (k,), np.int64), np.empty(shape + (k,), _DTYPE)
    target_prob, target_rank = np.empty(shape, _DTYPE), np.empty(shape, np.int64)
    kl = np.zeros(shape, _DTYPE)                                       # the last row: 0
    for r in range(len(rows)):
        last = r == len(rows) - 1
        logits = final_logits if last else model.unembed(residuals[r])  # (n, vocab)
        lse = final_lse if last else logsumexp_rows(logits)            # (n,)
        top_ids[r], top_probs[r] = _top_k(logits, lse, k)
        target_prob[r], target_rank[r] = _target_of(logits, lse, targets)
        if not last:
            dot = np.einsum("iv,iv->i", p_final, logits).astype(np.float64)
            kl[r] = np.maximum(neg_entropy - dot + lse, 0)
    tokens, _, _ = model.labels(ids)
    return LogitLens(ids=readonly(ids), tokens=tokens, rows=tuple(rows),
                     top_ids=readonly(top_ids), top_probs=readonly(top_probs),
                     target=readonly(targets), target_prob=readonly(target_prob),
                     target_rank=readonly(target_rank), kl=readonly(kl),
                     residuals=readonly(residuals), _model=model,
                     positions=readonly(chosen))


def logsumexp_rows(logits: np.ndarray) -> np.ndarray:
    """(n, vocab) float32 → (n,) float64: log Σ exp over each row (the softmax's normaliser)."""
    top = logits.max(axis=-1, keepdims=True)                           # (n, 1)
    shifted = np.subtract(logits, top)
    np.exp(shifted, out=shifted)
    return top[:, 0].astype(np.float64) + np.log(shifted.sum(axis=-1, dtype=np.float64))


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
    h0 = model.embed(ids)                                              # (n, d_model)
    rows, streams = [(LAYER, 0)], [h0[positions]]
    wanted = ("resid_mid", "resid_post") if sublayers else ("resid_post",)

    def read(layer: int, name: str, value: np.ndarray) -> None:
        if name in wanted:
            rows.append((ATTENTION, layer) if name == "resid_mid" else (LAYER, layer + 1))
            streams.append(np.array(value[0][positions], dtype=_DTYPE))   # (m, d_model)

    model.run_layers(h0, hook=read)
    return rows, np.stack(streams)


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
    target, or with `answer` an activation patching answer (each with its own error ids)."""
    if isinstance(token, str):
        ids = model.encode(token)
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


def _top_k(logits: np.ndarray, lse: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, k) ids and probabilities of the k most likely, most likely first (ties: lower id)."""
    vocab = logits.shape[-1]
    best = np.argpartition(logits, vocab - k, axis=-1)[:, vocab - k:]  # (n, k)
    values = np.take_along_axis(logits, best, axis=-1)
    order = np.lexsort((best, -values), axis=-1)
    best = np.take_along_axis(best, order, axis=-1)
    values = np.take_along_axis(logits, best, axis=-1).astype(np.float64)
    return best, np.exp(values - lse[:, None])


def _target_of(logits, lse, targets) -> tuple[np.ndarray, np.ndarray]:
    """(n,) the target's probability and rank (1 + how many tokens score higher)."""
    rows = np.arange(len(targets))
    chosen = logits[rows, targets]                                     # (n,)
    rank = 1 + (logits > chosen[:, None]).sum(axis=-1)
    return np.exp(chosen.astype(np.float64) - lse), rank
