"""The SQL store: engine set-up, the single group-committing writer, migrations, and the
queries each table needs (one module per table family)."""

from daemon.store.engine import Store, make_engine

__all__ = ["Store", "make_engine"]
