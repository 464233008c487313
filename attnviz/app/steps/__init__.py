"""The Step by step page: its ``render()`` in ``page``, its pieces in ``steps_view``."""
