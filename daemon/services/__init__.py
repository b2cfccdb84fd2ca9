"""Workflows that combine the store, the file layers and the bus: recall, and the
seed-review rule shared by the API and the seeds receptor. May import core, store, files
and bus; never the API, the CLI or the process."""
