"""The Multi-head page: its ``render()`` in ``page``."""
