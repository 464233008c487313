"""One module per page, each with ``render()``: the checkout's pages/*.py files run it inside
the app (attnviz.app.main.page_file), and `attnviz app` registers it with st.navigation as a
function. Not named ``pages``: a folder of that name beside attnviz/app/main.py would put
Streamlit in its old folder-based multipage mode for `attnviz app` (docs/architecture.md)."""
