"""Experiments: the tutorials' "why" questions, each answered by a live computation."""

import streamlit as st

from attnviz.ui import experiments_view as ex
from attnviz.ui import state, widgets

st.title("Experiments")
st.caption("Why attention is built the way it is: each tab changes one thing and shows, "
           "with numbers, what happens. The sidebar's input is used where it fits.")
view = state.current_view()
if not widgets.show_status(view):
    st.stop()

tabs = st.tabs(["√d_k scaling", "Tied vs separate Q/K", "Raw softmax(XXᵀ)X",
                "Word order & positions", "Masks & padding", "Cross-attention",
                "Bug: scale after softmax"])
with tabs[0]:
    ex.scaling_tab()
with tabs[1]:
    ex.tied_tab(view)
with tabs[2]:
    ex.raw_tab(view)
with tabs[3]:
    ex.order_tab(view)
with tabs[4]:
    ex.masks_tab(view)
with tabs[5]:
    ex.cross_tab(view)
with tabs[6]:
    ex.bug_tab(view)
