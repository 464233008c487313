"""attnviz: the Streamlit entry point. Navigation and the sidebar every page shares.

    streamlit run app.py
"""

import streamlit as st

from attnviz.ui import sidebar

st.set_page_config(page_title="attnviz: attention step by step",
                   page_icon=":material/visibility:", layout="wide")

PAGES = [
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/inputs.py", title="Inputs & weights", icon=":material/edit:"),
    st.Page("pages/steps.py", title="Step by step", icon=":material/footprint:"),
    st.Page("pages/multihead.py", title="Multi-head", icon=":material/view_module:"),
    st.Page("pages/experiments.py", title="Experiments", icon=":material/science:"),
    st.Page("pages/pretrained.py", title="Pretrained model", icon=":material/neurology:"),
]

page = st.navigation(PAGES)
sidebar.render()
page.run()
