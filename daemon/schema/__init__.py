"""The wire schema: what travels between the daemon and the programs that use it, defined
once and shared by the API, the client, the MCP server and the receptors.

- :mod:`daemon.schema.fields` and :mod:`daemon.schema.payloads`: the payload contract of each
  signal type (the types themselves are named in :mod:`daemon.core.signal_types`, which the
  core's own rules use too).
- :mod:`daemon.schema.recall`: the recall query.
- :mod:`daemon.schema.answers`: the API's answers (a recall, a seed, a stored signal, …).
- :mod:`daemon.schema.waits`: how long a caller may wait for a signal's deliveries.

Nothing here does I/O or imports more than :mod:`daemon.core`.
"""

__all__: list[str] = []
