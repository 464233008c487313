"""The toy tasks: small sequence problems that attention solves by looking at one known place.

Every task is the same rule with a different place to look: the answer at query position i is
the token at the position the task says query i should attend to,

    target[i] = x[attended[i]]          (no target where attended[i] = NO_TARGET)

so each task is two functions: `sample` draws input sequences, `attended` says where each
query must look. That place is also the pattern a trained head is expected to show.

Numpy only: the page lists the tasks without loading torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import Message

NO_TARGET = -1          # a query with nothing to predict (not scored, not in the loss)


@dataclass(frozen=True)
class Task:
    """One toy task. sample(rng, batch, length, vocab) → (batch, length) int64 tokens;
    attended(x) → (batch, length) the key position each query should read, or NO_TARGET.

    The expected pattern is the last layer's; `first_layer` (induction only) is what the first
    layer of a deeper model should do to make it possible.
    """

    name: str
    causal: bool          # a decoder task: queries see only earlier positions
    min_layers: int
    summary: str          # one line for the page
    pattern: str          # the expected attention pattern, in words
    sample: Callable[[np.random.Generator, int, int, int], np.ndarray]
    attended: Callable[[np.ndarray], np.ndarray]
    residual: bool = True   # False for copy: through a residual connection each token would
                            # reach the output without attention, and no head would need to
                            # look at itself
    first_layer: tuple[str, Callable[[np.ndarray], np.ndarray]] | None = None
    also_right: Callable[[np.ndarray], np.ndarray] | None = None   # (batch, n, n) bool: other
                            # keys as good as the attended one (induction: every earlier copy)

    def targets(self, x: np.ndarray) -> np.ndarray:
        """(batch, n) the token at each query's attended position, NO_TARGET where none."""
        where = self.attended(x)                                        # (batch, n)
        picked = np.take_along_axis(x, np.maximum(where, 0), axis=-1)
        return np.where(where == NO_TARGET, NO_TARGET, picked)

    def pattern_of(self, layer: int, layers: int) -> str | None:
        """In words, what a head of `layer` (of `layers`) is expected to attend to; None if
        the task expects nothing in particular there."""
        if layer == layers - 1:
            return self.pattern
        if self.first_layer is not None:
            return self.first_layer[0] if layer == 0 else None
        return self.pattern                 # a deeper model may solve the task in any layer

    def expected_keys(self, x: np.ndarray, layer: int, layers: int) -> np.ndarray | None:
        """(batch, n, n) bool: the keys a head of `layer` should put its largest weight on,
        for each query (rows with none are not scored); None where pattern_of is None."""
        if self.pattern_of(layer, layers) is None:
            return None
        last = layer == layers - 1 or self.first_layer is None
        where = self.attended(x) if last else self.first_layer[1](x)    # (batch, n)
        n = x.shape[-1]
        keys = (where[..., None] == np.arange(n)) & (where[..., None] != NO_TARGET)
        if last and self.also_right is not None:
            keys |= self.also_right(x)
        return keys


# ---- sampling ---------------------------------------------------------------------------------

def _uniform(rng: np.random.Generator, batch: int, n: int, vocab: int) -> np.ndarray:
    return rng.integers(0, vocab, size=(batch, n), dtype=np.int64)


def _distinct(rng: np.random.Generator, batch: int, n: int, vocab: int) -> np.ndarray:
    """No token twice in a sequence (while the vocabulary has enough), so "attend to my own
    position" and "attend to my own token" are the same place."""
    if vocab < n:
        return _uniform(rng, batch, n, vocab)
    return np.argsort(rng.random((batch, vocab)), axis=1)[:, :n].astype(np.int64)


def _repeated(rng: np.random.Generator, batch: int, n: int, vocab: int) -> np.ndarray:
    """Sequences "A B C … A B …": k distinct tokens, then a repeat of them from position s
    on (period k − s), with k and s drawn per sequence, so no fixed offset gives the answer:
    a query must find the earlier copy of its own token and read the token after it."""
    k = rng.integers(2, min(n - 1, vocab) + 1, size=batch)              # (batch,) distinct run
    s = rng.integers(0, k - 1)                                          # (batch,) s ≤ k − 2
    period = k - s
    x = np.zeros((batch, n), dtype=np.int64)
    m = min(n, vocab)                                                   # k ≤ m
    x[:, :m] = np.argsort(rng.random((batch, vocab)), axis=1)[:, :m]    # distinct tokens
    rows = np.arange(batch)
    for i in range(n):
        later = i >= k
        x[rows[later], i] = x[rows[later], i - period[later]]
    return x


# ---- where each query should look -------------------------------------------------------------

def _self(x: np.ndarray) -> np.ndarray:
    return np.broadcast_to(np.arange(x.shape[-1]), x.shape).copy()


def _mirror(x: np.ndarray) -> np.ndarray:
    return np.broadcast_to(np.arange(x.shape[-1])[::-1], x.shape).copy()


def _rank(x: np.ndarray) -> np.ndarray:
    """Query i reads the token of rank i (ties in order of position)."""
    return np.argsort(x, axis=-1, kind="stable")


def _previous(x: np.ndarray) -> np.ndarray:
    where = np.broadcast_to(np.arange(x.shape[-1]) - 1, x.shape).copy()
    where[..., 0] = NO_TARGET
    return where


def _after_any_copy(x: np.ndarray) -> np.ndarray:
    """(batch, n, n) bool: key j + 1 for every earlier j holding query i's token."""
    n = x.shape[-1]
    same = (x[..., :, None] == x[..., None, :]) & np.tri(n, k=-1, dtype=bool)   # j < i
    keys = np.zeros(same.shape, dtype=bool)
    keys[..., 1:] = same[..., :-1]                                      # j → j + 1
    return keys


def _after_last_copy(x: np.ndarray) -> np.ndarray:
    """Query i reads position j + 1, where j < i is the last earlier position holding the
    same token; NO_TARGET if the token has not appeared before."""
    n = x.shape[-1]
    where = np.full(x.shape, NO_TARGET, dtype=np.int64)
    for i in range(1, n):
        same = x[..., :i] == x[..., i:i + 1]                            # (batch, i)
        last = i - 1 - np.argmax(same[..., ::-1], axis=-1)              # last j with x_j = x_i
        where[..., i] = np.where(same.any(axis=-1), last + 1, NO_TARGET)
    return where


TASKS: dict[str, Task] = {t.name: t for t in (
    Task("copy", False, 1, "output the input unchanged",
         "query i attends to itself (the diagonal)", _uniform, _self, residual=False),
    Task("reverse", False, 1, "output the input backwards",
         "query i attends to position n − 1 − i (the anti-diagonal)", _uniform, _mirror),
    Task("sort", False, 1, "output the input sorted",
         "query i attends to the token of rank i", _uniform, _rank),
    Task("shift", True, 1, "each position outputs the token before it (causal)",
         "query i attends to position i − 1 (the diagonal below the main one)",
         _uniform, _previous),
    Task("induction", True, 2, "after “A B … A”, predict “B” (causal)",
         "query i attends to the position just after an earlier copy of its own token "
         "(an induction head)", _repeated, _after_last_copy,
         first_layer=("query i attends to position i − 1 (a previous-token head: each "
                      "position learns which token came before it)", _previous),
         also_right=_after_any_copy),
)}


def task_name(task: str) -> Message:
    """Task `task`'s name as a learner reads it ("reverse", 反转); links and files keep the id."""
    return Message(f"toy.task.{task}.name")


def token_labels(sequence) -> list[str]:
    """Labels for a toy sequence's rows and columns: "position: token" (``0: 3``, ``1: 7``…),
    so repeated tokens stay apart and positions read as the task's patterns count them."""
    return [f"{i}: {int(t)}" for i, t in enumerate(sequence)]


def get_task(name) -> Task:
    """The task called `name`, or an AttnvizInputError listing the tasks."""
    if name not in TASKS:
        raise AttnvizInputError("error.toy.unknown_task", name=repr(name), names=", ".join(TASKS))
    return TASKS[name]
