"""The Experiments page: its ``render()`` in ``page``, its pieces in ``experiments_view``."""
