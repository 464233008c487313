"""The Trace the answer page: its ``render()`` in ``page``, its pieces in ``trace_view``."""
