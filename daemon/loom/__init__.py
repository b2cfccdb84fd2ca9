"""Loom: a local web inspector of the memory, served by the daemon under ``/loom``."""
