"""The Generate page: its ``render()`` in ``page``, its pieces in ``generate_view``, its settings
and generation as the session holds them (which a link also carries) in ``generate_state``."""
