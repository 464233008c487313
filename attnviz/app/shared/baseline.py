"""A pinned baseline: edit and see the difference (issue 11.7).

"Pin as baseline" keeps the recipe of the current view (its settings and a copy of its edits)
in the session, never a trace: each run rebuilds the baseline with `build_view` and compares it
with the current trace (`attnviz.diff`, now − baseline). Nothing of the comparison outlives the
run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from attnviz.app import keys
from attnviz.session import edits
from attnviz.core.modes import Mode
from attnviz.plot.diff_figures import change_heatmap, change_title, format_change, kl_bars
from attnviz.i18n import Message, t
from attnviz.core.engine import AttentionTrace, Step
from attnviz.core.errors import AttnvizInputError
from attnviz.describe.labels import step_layout, unique
from attnviz.session.build import build_view
from attnviz.session.settings import TOY_MODE, Settings, ToyChoice
from attnviz.session.view import View
from attnviz.core.diff import TraceDiff, diff
from attnviz.app.shared import state, widgets
from attnviz.app.shared.text import literal
from attnviz.models.trainer.toy_tasks import task_name

SHORT_TEXT = 28               # characters of a pinned sentence shown in the status


@dataclass(frozen=True)
class Pin:
    """What rebuilds the pinned view: small, no intermediate arrays."""

    settings: Settings
    edits: dict               # {matrix name → attnviz.session.edits.Edit}, a copy
    toy: ToyChoice | None = None   # the Toy model input's run, checkpoint and sequence


@dataclass
class Comparison:
    """This run's comparison of the current view with the pinned one (never kept)."""

    pin: Pin
    base: View
    diff: TraceDiff | None    # None when the two cannot be compared
    problem: str | None       # why not, in words (shown instead of the changes)
    titles: dict[str, str]    # step name → title, of both traces


def pinned() -> Pin | None:
    found = st.session_state.get(keys.BASELINE)
    return found if isinstance(found, Pin) else None


def pin() -> None:
    """Pin the current settings and edits (as they are when the button is clicked)."""
    st.session_state[keys.BASELINE] = Pin(*state.recipe())
    # the status appears above the Inputs page's editor and moves it down: a new editor (not
    # the moved one) takes the next click on the cell under the pointer, not on its old place
    state.bump_editor_version()


def unpin() -> None:
    st.session_state.pop(keys.BASELINE, None)
    state.bump_editor_version()           # the status goes: a new editor, as in `pin`


def compare(view: View) -> Comparison | None:
    """The current view against the pinned baseline; None when nothing is pinned."""
    p = pinned()
    if p is None:
        return None
    base = build_view(p.settings, p.edits, p.toy)
    titles = {s.name: s.title for tr in (base.trace, view.trace) if tr is not None
              for s in tr.steps}
    if base.trace is None:
        return Comparison(p, base, None, Message("baseline.cannot_rebuild",
                                                 error=base.error), titles)
    try:
        return Comparison(p, base, diff(base.trace, view.trace), None, titles)
    except AttnvizInputError as exc:
        return Comparison(p, base, None, _mismatch(base.trace, view.trace, str(exc)), titles)


def _mismatch(a: AttentionTrace, b: AttentionTrace, fallback: str) -> str:
    """Why two traces cannot be compared, in the learner's words (the active language)."""
    sizes = [("tokens", a.n_q, b.n_q), ("keys", a.n_k, b.n_k),
             ("heads", a.num_heads, b.num_heads), ("d_k", a.d_k, b.d_k), ("d_v", a.d_v, b.d_v),
             ("d_model", None if a.x is None else a.x.shape[1],
              None if b.x is None else b.x.shape[1]),
             ("output", a.output.shape[1], b.output.shape[1])]
    parts = [t(f"baseline.size.{name}", count=old, new=new) for name, old, new in sizes
             if old != new and old is not None and new is not None
             and not (name == "keys" and a.n_q != b.n_q)]
    why = t("baseline.has", parts=t("list.separator").join(parts)) if parts else \
        t("baseline.differ", problem=fallback)
    return t("baseline.mismatch", why=why)


def _toy_phrase(toy: ToyChoice | None, layer: int) -> str:
    if toy is None:
        return t("baseline.what.toy_model")
    return t("baseline.what.toy", layer=layer, task=task_name(toy.run.config.task), step=toy.step,
             example=toy.example)


def describe(comp: Comparison) -> str:
    """What is pinned, in one phrase (user text included: show it with `literal`)."""
    s, base = comp.pin.settings, comp.base
    text = s.sentence if len(s.sentence) <= SHORT_TEXT else s.sentence[:SHORT_TEXT].rstrip() + "…"
    what = {Mode.SENTENCE: lambda: t("baseline.what.sentence", text=text),
            Mode.PRESET: lambda: t("baseline.what.preset", preset=t(f"preset.{s.preset}.title")),
            Mode.MATRIX_X: lambda: t("baseline.what.matrix_x"),
            Mode.QKV: lambda: t("baseline.what.qkv"),
            Mode.PRETRAINED: lambda: t("baseline.what.pretrained", layer=s.layer, text=text),
            TOY_MODE: lambda: _toy_phrase(comp.pin.toy, s.layer)}.get(s.mode, lambda: s.mode)()
    details = []
    if base.trace is not None:
        details += [t("baseline.detail.tokens", count=base.trace.n_q),
                    t("baseline.detail.heads", count=base.trace.num_heads)]
    if s.mode == Mode.SENTENCE:
        details.append(f"d_model {s.d_model}")
    if s.mode in (Mode.SENTENCE, Mode.MATRIX_X):
        details.append(t("baseline.detail.seed", seed=s.seed))
    changed = ", ".join(edits.entry(n).shown for n in comp.pin.edits if n in edits.CATALOGUE)
    shown = t("baseline.what.details", what=what, details=", ".join(details)) if details \
        else what
    return t("baseline.with_edits", what=shown, edits=changed) if changed else \
        t("baseline.without_edits", what=shown)


def buttons(where: list, *, key: str) -> None:
    """Pin (or pin again) and, when pinned, Unpin, in the containers `where` (two)."""
    is_pinned = pinned() is not None
    widgets.action_button(":material/push_pin: " + t("baseline.pin_again" if is_pinned
                                                     else "baseline.pin"),
                          pin, key=keys.PIN(key), where=where[0], width="stretch",
                          help=t("baseline.pin.help"))
    if is_pinned:
        widgets.action_button(":material/close: " + t("baseline.unpin"), unpin,
                              key=keys.UNPIN(key), where=where[1], width="stretch",
                              help=t("baseline.unpin.help"))


def status(comp: Comparison | None, *, where=st, compact: bool = False) -> None:
    """Say what is pinned and that the current trace is compared with it (or why not);
    `compact`: for Step by step, where the change itself is below."""
    if comp is None:
        return
    if comp.problem:
        where.info(literal(t("baseline.status.problem", what=describe(comp),
                             problem=str(comp.problem))), icon=":material/push_pin:")
        return
    where.info(literal(t("baseline.status.compact" if compact else "baseline.status.pinned",
                         what=describe(comp))), icon=":material/push_pin:")
    one_sided = _one_sided(comp)
    if one_sided:
        where.caption(literal(one_sided))


def _one_sided(comp: Comparison) -> str:
    """A sentence naming the steps only one of the traces has (not compared)."""
    d, parts = comp.diff, []
    for names, who in ((d.only_in_a, "baseline.only_in_baseline"),
                       (d.only_in_b, "baseline.only_in_current")):
        if names:
            parts.append(t(who, steps=", ".join(f"“{comp.titles[n]}”" for n in names)))
    return t("baseline.not_compared", parts=t("list.separator").join(parts)) if parts else ""


def step_controls(comp: Comparison | None) -> None:
    """Step by step's compact row: what is pinned (or how to pin), Pin / Unpin."""
    cols = st.columns([5, 2], vertical_alignment="center")      # the buttons one above the
    side = cols[1].container()                                  # other: whole at 1024 px
    if comp is None:
        cols[0].caption(t("baseline.how_to_pin"))
    else:
        status(comp, where=cols[0], compact=True)
    buttons([side, side], key=keys.STEPS_BASELINE)


def step_change(view: View, comp: Comparison | None, step: Step, head: int,
                query: int | None) -> None:
    """The step's change from the baseline: Δ heatmap (now − baseline) of the same head, max
    |Δ|, and on the weights step each query's KL divergence (bits)."""
    if comp is None or comp.diff is None:
        return
    st.markdown(f"#### {change_title()}")
    if step.name not in comp.diff.names:
        st.caption(literal(t("baseline.step_only_now", title=step.title)))
        return
    sd = comp.diff[step.name]
    delta = _delta(view.trace, comp.base.trace, sd.stored, step, head, query)
    layout = step_layout(view.trace, step.name, head, view.tokens_q, view.tokens_k, query)
    shown = float(np.abs(delta).max(initial=0.0))
    cols = st.columns(3)
    if step.per_head:
        cols[0].metric(t("baseline.metric.head_query" if sd.stored is None
                         else "baseline.metric.head", head=head), format_change(shown))
        cols[1].metric(t("baseline.metric.all_heads"), format_change(sd.max_abs))
    else:
        cols[0].metric("max |Δ|", format_change(sd.max_abs))
    st.caption(t("baseline.colours") + ("" if sd.max_abs else t("baseline.nothing_changed")))
    title = t("baseline.change_of", change=change_title(), title=step.title)
    title = t("figure.title.head", title=title, head=head) if step.per_head else title
    widgets.chart(change_heatmap(delta, row_labels=layout.rows, col_labels=layout.cols,
                                 title=title, row_title=layout.row_axis,
                                 col_title=layout.col_axis), key=keys.DELTA_MAP(step.name))
    widgets.toggled_table(delta, layout.rows, layout.cols, key=keys.DELTA_TABLE(step.name),
                          label=t("baseline.table"))
    if step.name == "weights":
        _kl(view, comp.diff.kl[head], head)


def _delta(now: AttentionTrace, base: AttentionTrace, stored, step: Step, head: int,
           query: int | None) -> np.ndarray:
    """The 2-D change the page shows, laid out like the step's own heatmap."""
    if stored is None:         # weighted values: one head's one query, never all at once
        q = query or 0
        return now.weighted_values(head, q) - base.weighted_values(head, q)     # (n_k, d_v)
    return stored[head] if step.per_head else stored


def _kl(view: View, kl: np.ndarray, head: int) -> None:
    """Each query's KL(baseline ‖ now) of its weights row (n_q,), as bars and a table."""
    st.markdown(t("baseline.kl.explained"))
    widgets.chart(kl_bars(kl, view.tokens_q, title=t("baseline.kl.title", head=head)),
                  key=keys.DELTA_KL)
    widgets.toggled_table(kl[:, None], view.tokens_q, [t("baseline.kl.column")],
                          key=keys.DELTA_KL_TABLE, label=t("baseline.kl.table"))


def summary(comp: Comparison | None, name: str) -> None:
    """One line: the max |Δ| of step `name` (all heads), for the Multi-head page's sections."""
    if comp is None or comp.diff is None:
        return
    if name not in comp.diff.names:
        st.caption(t("baseline.summary.no_step"))
        return
    sd = comp.diff[name]
    line = t("baseline.summary", title=sd.title, change=format_change(sd.max_abs))
    if name == "weights":
        kl = comp.diff.kl
        worst = np.unravel_index(np.argmax(np.where(np.isnan(kl), -1, kl)), kl.shape)
        token = unique(comp.base.tokens_q)[worst[1]] if comp.base.tokens_q else worst[1]
        line += t("baseline.summary.kl", kl=format_change(float(kl[worst])), head=worst[0],
                  token=token)
    st.caption(literal(line + t("baseline.summary.end")))
