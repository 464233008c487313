"""The Inputs & weights page: its ``render()`` in ``page``, its pieces in ``editor``."""
