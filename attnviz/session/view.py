"""What every page draws: a `View` (a trace and its labels, or an error), the edited cells an
overflow is blamed on (`Blame`), the editable matrices as they are now (`current_matrices`) and
the toy model's answers with the edits (`toy_answers`). `build_view` (attnviz.session.build)
makes a View. No streamlit."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attnviz.core.engine import AttentionTrace
from attnviz.core.weights import PARAMETERS, MultiHeadWeights
from attnviz.i18n import Message
from attnviz.session.settings import Settings, ToyChoice
from attnviz.tutorials.presets import Preset


NO_TOY_RUN = "error.toy.no_run"     # the error's id: View.error.msg_id when no run is chosen


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
class Blame:
    """An edited cell that makes a step overflow, as the editor shows it."""

    name: str                 # the matrix, by catalogue name ("w_q")
    head: int | None          # its head, for a matrix with one slice per head
    text: str                 # "W_Q of head 0, row 1 (d0), column 1 (q0) = 1e308"


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


def current_matrices(view: View) -> dict[str, np.ndarray]:
    """Every editable matrix of the view as it is now (edits included), by catalogue name;
    empty when the input has no parameters (Q, K, V entered directly). Also when the trace
    cannot be computed from them (an edited cell overflows a step): they can be fixed."""
    if view.params is None or view.x_in is None:
        return {}
    found = {"x": view.x_in, **{n: getattr(view.params, n) for n in PARAMETERS}}
    return {n: a for n, a in found.items() if a is not None}
