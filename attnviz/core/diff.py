"""What changed between two traces, step by step: a baseline pinned before an edit (trace_a)
and the trace after it (trace_b).

    d = attnviz.diff(baseline, edited)
    d["weights"].delta          # (H, n_q, n_k) edited − baseline
    d["weights"].max_abs        # max |Δ| over the whole step
    d.kl                        # (H, n_q) KL(baseline row ‖ edited row) in bits
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from attnviz.core.arrays import readonly
from attnviz.core.errors import AttnvizInputError
from attnviz.core.trace import AttentionTrace, Step

__all__ = ["StepDiff", "TraceDiff", "diff"]


@dataclass(frozen=True, eq=False)
class StepDiff:
    """One step's change, b − a, in the step's own shape and axes.

    For masked scores, a cell masked (−∞) in both traces did not change: its Δ is 0; a cell
    masked in only one is ±∞ (a key was masked or unmasked), and so is max_abs. A step computed
    on demand (weighted values) stores no Δ: ``delta`` computes it at each access.
    """

    name: str
    title: str
    axes: tuple[str, ...]
    max_abs: float                   # max |b − a| over the step (0.0 for an empty step)
    stored: np.ndarray | None        # b − a; None for an on-demand step
    compute: Callable[[], np.ndarray] | None = field(default=None, repr=False, compare=False)

    @property
    def delta(self) -> np.ndarray:
        """b − a, shaped like the step's array."""
        return self.stored if self.compute is None else self.compute()


@dataclass(frozen=True, eq=False)
class TraceDiff:
    """Every step both traces have, in trace_a's order, and the change of the weights rows.

    kl (H, n_q): KL(a_i ‖ b_i) = Σ_j a_ij log₂(a_ij / b_ij) in bits for each head and query row
    i of the weights (0 log 0 = 0; +∞ where b gives 0 weight to a key a attends to, e.g. a key
    masked only in b). only_in_a / only_in_b name the steps one trace has and the other not
    (e.g. masked_scores when a mask was switched on).
    """

    steps: list[StepDiff]
    kl: np.ndarray
    only_in_a: tuple[str, ...] = ()
    only_in_b: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    @property
    def max_abs(self) -> dict[str, float]:
        """Step name → max |Δ|, in step order."""
        return {s.name: s.max_abs for s in self.steps}

    def __getitem__(self, name: str) -> StepDiff:
        for s in self.steps:
            if s.name == name:
                return s
        raise AttnvizInputError("error.diff.no_step", name=repr(name),
                                steps=", ".join(self.names))


def diff(trace_a: AttentionTrace, trace_b: AttentionTrace) -> TraceDiff:
    """The change from trace_a (e.g. a pinned baseline) to trace_b, per step: Δ = b − a and
    max |Δ|, plus the per-row KL divergence of the weights (bits). Steps present in only one
    trace are listed, not compared. Traces whose common steps differ in shape (another
    sentence length, another number of heads or d_k) are refused, naming the step and shapes.
    """
    for name, t in (("trace_a", trace_a), ("trace_b", trace_b)):
        if not isinstance(t, AttentionTrace):
            raise AttnvizInputError("error.diff.not_a_trace", name=name,
                                    type=type(t).__name__)
    steps_b = {s.name: s for s in trace_b.steps}
    names_a = [s.name for s in trace_a.steps]
    common = [s for s in trace_a.steps if s.name in steps_b]
    for s in common:
        _check_same_shape(s, steps_b[s.name], trace_a, trace_b)
    return TraceDiff(
        steps=[_step_diff(s, steps_b[s.name], trace_a, trace_b) for s in common],
        kl=_kl_bits(trace_a.weights, trace_b.weights),
        only_in_a=tuple(n for n in names_a if n not in steps_b),
        only_in_b=tuple(n for n in steps_b if n not in names_a))


def _shape(step: Step, t: AttentionTrace) -> tuple[int, ...]:
    if step.on_demand:                       # weighted values: (H, n_q, n_k, d_v), not computed
        return t.weights.shape + (t.d_v,)
    return step.stored.shape


def _check_same_shape(step_a: Step, step_b: Step, a: AttentionTrace, b: AttentionTrace) -> None:
    shape_a, shape_b = _shape(step_a, a), _shape(step_b, b)
    if shape_a != shape_b:
        raise AttnvizInputError("error.diff.shapes", name=repr(step_a.name),
                                title=step_a.title_message, shape_a=str(shape_a),
                                shape_b=str(shape_b))


def _step_diff(step_a: Step, step_b: Step, a: AttentionTrace, b: AttentionTrace) -> StepDiff:
    if step_a.on_demand:                     # never hold (H, n_q, n_k, d_v) for long: per head
        def compute():
            return b.weights[..., None] * b.v[:, None] - a.weights[..., None] * a.v[:, None]

        per_head = (_weighted_values_max_change(a, b, h) for h in range(a.num_heads))
        return StepDiff(step_a.name, step_a.title, step_a.axes, float(max(per_head)),
                        None, compute)
    delta = readonly(_delta(step_a.stored, step_b.stored))
    max_abs = float(np.abs(delta).max(initial=0.0))
    return StepDiff(step_a.name, step_a.title, step_a.axes, max_abs, delta)


def _delta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """b − a, with 0 where both are the same infinity (a cell masked in both: no change)."""
    with np.errstate(invalid="ignore"):
        delta = np.subtract(b, a)
    same_inf = np.isinf(a) & (a == b)
    if same_inf.any():
        delta[same_inf] = 0.0
    return delta


def _kl_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(H, n_q): Σ_j a_ij log₂(a_ij / b_ij) per row, in float64; 0 log 0 = 0."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    terms = np.zeros_like(a)                                      # (H, n_q, n_k)
    with np.errstate(divide="ignore"):
        np.multiply(a, np.log2(a, where=a > 0, out=np.zeros_like(a))
                    - np.log2(b, where=a > 0, out=np.zeros_like(b)), out=terms, where=a > 0)
    return terms.sum(axis=-1)


BLOCK_CELLS = 2**22        # weighted values compared a block of queries at a time (16 MB)


def _weighted_values_max_change(a: AttentionTrace, b: AttentionTrace, head: int) -> float:
    """max |Δ| of `head`'s weighted values, the same products as ``weighted_values(head)``
    made for a block of queries at a time: the whole is n_q · n_k · d_v (a gigabyte at 512
    tokens and d_v 1024), and its max is the max of the blocks' (NaN if any is)."""
    rows = max(1, BLOCK_CELLS // max(1, a.n_k * a.d_v))
    blocks = [np.abs(b.weights[head, q:q + rows, :, None] * b.v[head]
                     - a.weights[head, q:q + rows, :, None] * a.v[head]).max(initial=0.0)
              for q in range(0, a.n_q, rows)]
    return float(np.max(blocks, initial=0.0))
