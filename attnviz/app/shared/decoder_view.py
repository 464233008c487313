"""What the step pages add for a modern decoder's attention — SmolLM2's layers, or a synthetic
input with K-V heads or rotary positions: the rotation angle of every position and frequency pair
beside q and k before and after rotation, which K/V head each query head shares, and the causal
mask. Each page calls one function here; each draws nothing for plain attention."""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import t
from attnviz.core.grouped_query import kv_head, query_heads
from attnviz.core.modes import Mode
from attnviz.plot import decoder_figures
from attnviz.session.view import View
from attnviz.models.catalogue.registry import ModelEntry
from attnviz.app import keys
from attnviz.app.shared import widgets
from attnviz.session import edits

ROTATION_STEPS = ("q", "k", "q_rotated", "k_rotated")
SHARED_STEPS = ("k", "v", "k_rotated")
SHARED_MATRICES = ("w_k", "w_v", "b_k", "b_v")     # one slice per K/V head


def causal_model(view: View) -> ModelEntry | None:
    """The causal pretrained model whose layer `view` shows (None: any other input)."""
    s = view.settings
    return s.model_entry if s.mode == Mode.PRETRAINED and s.model_entry.causal else None


def step_notes(view: View, step: str, head: int) -> None:
    """Step by step, below step `step` of `head`: for the rotations, each position's angle per
    frequency pair; for K and V, the K/V head this query head shares; for the mask and the
    weights of the decoder, its causal mask."""
    tr = view.trace
    if tr is None:
        return
    if tr.rope_base is not None and step in ROTATION_STEPS:
        st.caption(t(f"decoder_view.rotation.{step}", base=f"{tr.rope_base:g}", d_k=tr.d_k))
        widgets.chart(decoder_figures.rotation_angles_figure(
            tr.rope_angles, tr.rope_base, tr.k_positions, view.tokens_k),
            key=keys.ROPE_ANGLES(step))
    if tr.kv_group > 1 and step in SHARED_STEPS:
        st.caption(sharing_caption(view, head))
    model = causal_model(view)
    if model and step in ("masked_scores", "weights"):
        st.caption(t("decoder_view.causal", model=model.shown))


def sharing_caption(view: View, head: int) -> str:
    return head_reads(head, view.trace.num_heads, view.trace.num_kv_heads)


def head_reads(head: int, num_heads: int, num_kv_heads: int) -> str:
    """Which key/value head query head `head` reads and the query heads sharing it."""
    kv = kv_head(head, num_heads, num_kv_heads)
    return t("decoder.head_reads", head=head, kv_head=kv,
             heads=_numbers(query_heads(kv, num_heads, num_kv_heads)))


def _numbers(heads: range) -> str:
    return t("decoder.number_separator").join(map(str, heads))


def multihead_notes(view: View) -> None:
    """Multi-head, below every head's weights: which K/V head each query head reads (a map),
    and the decoder's causal mask."""
    tr = view.trace
    if tr is None:
        return
    if tr.kv_group > 1:
        st.caption(t("decoder_view.sharing", heads=tr.num_heads, kv_heads=tr.num_kv_heads,
                     group=tr.kv_group))
        widgets.chart(decoder_figures.kv_sharing_figure(tr.num_heads, tr.kv_group),
                      key=keys.MH_KV_SHARING)
    if tr.rope_base is not None:
        st.caption(t("decoder_view.rotated", base=f"{tr.rope_base:g}"))
    model = causal_model(view)
    if model:
        st.caption(t("decoder_view.causal", model=model.shown))


def matrix_head(view: View, name: str, head: int | None) -> int | None:
    """Inputs & weights: the slice of `name` to edit for the picked query head `head`. W_K,
    W_V (and their biases) have one slice per K/V head: the one this query head reads, said in
    a caption (editing it changes every query head that shares it)."""
    w = view.params
    if head is None or w is None or name not in SHARED_MATRICES or w.num_kv_heads == w.num_heads:
        return head
    kv = w.kv_head(head)
    st.caption(t("decoder_view.edit_shared", matrix=edits.entry(name).shown, kv_head=kv,
                 heads=_numbers(query_heads(kv, w.num_heads, w.num_kv_heads))))
    return kv
