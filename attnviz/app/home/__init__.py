"""The Home page: its ``render()`` in ``page``."""
