"""Home: the sentence's tokens, every head's attention at a glance, the output, a map of steps."""

import streamlit as st

from attnviz import figures
from attnviz.ui import scales, state, widgets
from attnviz.ui.text import token_line

state.init()   # first: on a fresh server's first request it runs app.py around this page
st.title("Self-attention, one step at a time")
st.caption("Type a sentence in the sidebar (English or Chinese), or pick a tutorial's worked "
           "example. Every number below is computed from it, and every step can be opened.")

view = widgets.view_or_stop()
t = view.trace

st.subheader(f"Tokens ({len(view.tokens_q)})")
st.markdown(token_line(view.tokens_q))

st.subheader("Attention weights, every head")
st.caption("Row = the token asking (query), column = the token it looks at (key). Each row "
           "sums to 1. Darker = more attention.")
scale = scales.weight_scale_picker(t.n_k)
widgets.chart(figures.heads_grid(t, view.tokens_q, view.tokens_k, weight_scale=scale),
              key="home_grid")

last = t.steps[-1]
st.subheader(last.title)
st.latex(last.formula)
widgets.chart(figures.step_figure(t, last.name, tokens_q=view.tokens_q,
                                  tokens_k=view.tokens_k), key="home_output")

st.subheader("The steps")
PAGE_MAP = [
    ("pages/inputs.py", "Inputs & weights: X, W_Q, W_K, W_V, W_O", ":material/edit:",
     "Edit any cell, paste or upload a matrix, randomise."),
    ("pages/steps.py", "Step by step: Q K V → scores → softmax → Z", ":material/footprint:",
     " → ".join(s.title for s in t.steps)),
    ("pages/multihead.py", "Multi-head: heads, concat, W_O", ":material/view_module:",
     "All heads side by side, their concatenation and the output projection."),
    ("pages/experiments.py", "Experiments: why √d_k, why W_Q ≠ W_K, …", ":material/science:",
     "The tutorials' why-questions, each answered with live numbers."),
    ("pages/pretrained.py", "Pretrained model: a real BERT's 72 heads", ":material/neurology:",
     "all-MiniLM-L6-v2's attention on your sentence, every layer and head."),
]
for i, (path, label, icon, caption) in enumerate(PAGE_MAP):
    if i % 3 == 0:
        cols = st.columns(3)
    with cols[i % 3]:
        widgets.page_link(path, label, icon)
        st.caption(caption)

widgets.downloads(view, key="home")
