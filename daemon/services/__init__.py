"""Workflows that combine the store, the file layers and the bus: recall; the command path
(``commands.py``) with its refusals (``errors.py``) and the rules it shares with the
receptors (``review.py``, ``governance.py``); the running daemon as the API and Loom see it
(``running.py``). May import core, store, files, search, schema and bus; never the API,
Loom, the CLI or the process."""
