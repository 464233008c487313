"""The Streamlit app, and the only place streamlit is imported: session state (the settings,
edits and view of attnviz.session kept per browser session), links and widgets, one module per page in pages/,
the navigation both entry points build (navigation), and main.py, the script `attnviz app`
runs."""
