"""Data shapes: the validated :class:`Signal` and the SQL tables."""
