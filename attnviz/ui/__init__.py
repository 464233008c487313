"""Streamlit-only helpers (state, widgets, page pieces): imported by app.py and pages only."""
