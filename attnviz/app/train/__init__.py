"""The Train page: its ``render()`` in ``page``, its pieces in ``train_view``."""
