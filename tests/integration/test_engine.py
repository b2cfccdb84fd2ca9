"""The engines under the store (SQLite): how a write transaction begins."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from daemon.store import Store, Tx
from daemon.store.migrate import upgrade


def test_a_write_holds_the_database_lock_from_its_begin(tmp_path: Path) -> None:
    """So it can never fail half way, after reading, because another connection (the CLI,
    a second process) began writing meanwhile: that one waits, or is refused, instead."""
    path = tmp_path / "cambium.db"
    upgrade(f"sqlite:///{path}")
    store = Store(f"sqlite:///{path}")

    def begun(tx: Tx) -> str:  # nothing read or written yet
        with closing(sqlite3.connect(path, timeout=0, isolation_level=None)) as other:
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                other.execute("BEGIN IMMEDIATE")
            return str(other.execute("SELECT count(*) FROM signals").fetchone()[0])

    try:
        assert store.write_sync(begun) == "0", "reading alongside it still works"
    finally:
        store.close()
