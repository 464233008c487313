"""The Read the model page: its ``render()`` in ``page``, its pieces in ``reading_view``."""
