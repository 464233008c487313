"""The reference for benchmarks/bench_browser.py: a bare Streamlit page with one plotly heatmap.

    streamlit run benchmarks/bare_page.py

Whatever attnviz's pages take beyond this page's time to its first heatmap is attnviz's own.
"""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

z = np.random.default_rng(0).random((12, 12))
st.plotly_chart(go.Figure(go.Heatmap(z=z)))
