"""The engines under the store (SQLite): how a write transaction begins."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

import anyio
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


@pytest.mark.asyncio
async def test_the_writer_is_let_in_between_another_threads_transactions(tmp_path: Path) -> None:
    """The index's upkeep writes on its own connection, transaction after transaction (the
    start's indexing of 100,000 marks: a minute). SQLite's busy handler looks again only
    every 25-100 ms, so the bus's writer, waiting for the lock, stayed out for seconds (a
    note took 5 s). Each of those transactions now lets a waiting writer in first."""
    path = tmp_path / "cambium.db"
    upgrade(f"sqlite:///{path}")
    store = Store(f"sqlite:///{path}")
    store.start()
    done: list[int] = []
    written, going = threading.Event(), threading.Event()

    def side_job(tx: Tx) -> None:
        time.sleep(0.01)  # holding the lock, as a chunk of indexing does

    def side_writer() -> None:
        while len(done) < 200 and not written.is_set():
            store.write_sync(side_job)
            done.append(1)
            if len(done) == 3:
                going.set()

    side = threading.Thread(target=side_writer)
    side.start()
    try:
        assert await anyio.to_thread.run_sync(going.wait, 10)
        await store.write(lambda tx: None)
        written.set()
        let_in_after = len(done)
    finally:
        side.join()
        store.close()
    assert let_in_after < 60, f"the writer waited for {let_in_after} of the other's transactions"
