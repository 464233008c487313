"""The Streamlit app, and the only place streamlit is imported: a folder per page (its
``render()`` in ``page.py`` beside the page's own pieces), ``shared/`` for what several pages use
(session state, links, the navigation, widgets), ``sidebar/``, ``runtime/`` for what the server
process switches on, ``keys.py`` (every session-state key, declared once) and ``main.py``, the
script `attnviz app` runs."""
