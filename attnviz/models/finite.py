"""A real model's numbers are numbers: what a page draws from a run of SmolLM2 or MiniLM
(hidden states, attention weights, value norms, logits, embeddings) never holds NaN or ±inf
drawn as if it were data (issue 26). A damaged weight (a cache file with bytes overwritten, a
weight of 1e30 whose products overflow) would give such numbers; the run then raises
AttnvizInputError("error.model.not_finite") naming where: "layer 3, the attention scores",
"the logits", "the embeddings", and in a generation which new token was being chosen.

The check is cheap: one finite test per layer on an array the layer computed anyway (its
output: NaN and ±inf propagate into it from anything before), and one on the logits (spared,
as the engine spares its scores, when a bound shows none can be anything but finite), and
one on the probabilities a page writes (a generation's, the next-token bars', the logit lens's
cells and KL): those are checked themselves, whatever let their logits through. Only
when it fails is the layer looked at part by part (``first_not_finite``), so the error names
the first of its steps that holds a non-finite number; the engine's own overflow error
(error.overflow.<step>, a trace's steps) is turned into the same error with the layer added
(``from_engine``). The error keeps ``layer`` (None outside a layer), ``part`` (a name of
PARTS, or "embeddings", "logits", "embedding") and ``token`` (the new token being chosen in a
generation, from 1; None elsewhere) as attributes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import Message

# the parts of a layer, in the order a layer computes them: model.part.<name> says each
PARTS = ("input", "q", "k", "v", "q_rotated", "k_rotated", "scores", "masked_scores",
         "weights", "z", "output", "mlp", "value_norms")
# where outside a layer: model.where.<name>
OUTSIDE = ("embeddings", "logits", "embedding")


def quiet(compute: Callable) -> Callable:
    """`compute` without numpy's overflow and invalid-value warnings: the checks say where a
    number stopped being finite, in the page's language, instead of a line in the server's
    log."""
    @functools.wraps(compute)
    def run(*args, **kwargs):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return compute(*args, **kwargs)

    return run


def all_finite(a: np.ndarray) -> bool:
    """True when `a` holds no NaN and no ±inf. Two reductions (max and min propagate NaN, and
    warn of nothing), no element-wise temporary: about 5 µs for a generated token's (1,
    d_model) row, 1.5–2 ms for a 64-token run's 3.1 million logits."""
    return a.size == 0 or bool(np.isfinite(a.max()) and np.isfinite(a.min()))


def not_finite(model: str, part: str, *, layer: int | None = None,
               token: int | None = None) -> AttnvizInputError:
    """The error for a non-finite number of `model` (its name) in `part` of `layer` (a name of
    PARTS), or outside every layer (`part` one of OUTSIDE, layer None); `token`: the new token
    a generation was choosing (from 1), None elsewhere."""
    if part in OUTSIDE:
        where = Message(f"model.where.{part}")
    else:
        where = Message("model.where.layer", layer=layer, part=Message(f"model.part.{part}"))
    if token is not None:
        where = Message("model.where.token", token=token, where=where)
    error = AttnvizInputError("error.model.not_finite", model=model, where=where)
    error.layer, error.part, error.token = layer, part, token
    return error


def at_token(exc: AttnvizInputError, token: int) -> AttnvizInputError:
    """`exc` said while a generation chose new token `token`: error.model.not_finite with the
    token added; any other error as it is."""
    if exc.msg_id != "error.model.not_finite" or exc.token is not None:
        return exc
    return not_finite(exc.params["model"], exc.part, layer=exc.layer, token=token)


def first_not_finite(parts: Iterable[tuple[str, np.ndarray | Callable[[], np.ndarray]]]
                     ) -> str | None:
    """The name of the first of `parts` — (name, array, or a function computing it only when
    asked), in the order the layer computes them — that holds NaN or ±inf; None if none."""
    for name, a in parts:
        if not all_finite(a() if callable(a) else a):
            return name
    return None


def from_engine(exc: AttnvizInputError, model: str, layer: int,
                token: int | None = None) -> AttnvizInputError:
    """The engine's error for layer `layer`'s trace as the model's: an overflowing step
    (error.overflow.<step>, its ``step`` attribute) or a non-finite input x (the engine's
    error.array.nan / .infinite naming x) becomes error.model.not_finite naming the layer and
    the step; any other error is returned as it is."""
    step = getattr(exc, "step", None)
    if step in PARTS:
        return not_finite(model, step, layer=layer, token=token)
    if exc.msg_id in ("error.array.nan", "error.array.infinite") and \
            exc.params.get("name") == "x":
        return not_finite(model, "input", layer=layer, token=token)
    return exc


__all__ = ["PARTS", "all_finite", "at_token", "first_not_finite", "from_engine", "not_finite", "quiet"]
