"""benchmarks/bare_page.py plus attnviz's sidebar: what the sidebar alone adds to a first visit.

    streamlit run benchmarks/bare_sidebar_page.py      (used by profile_first_visit.py)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import streamlit as st  # noqa: E402

from attnviz.app.sidebar import panel as sidebar  # noqa: E402

sidebar.render()
z = np.random.default_rng(0).random((12, 12))
st.plotly_chart(go.Figure(go.Heatmap(z=z)))
