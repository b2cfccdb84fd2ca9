"""The ``cambium`` command line."""
