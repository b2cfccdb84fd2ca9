"""The raw SQLite baseline every durable figure is measured against: plain ``sqlite3`` in WAL
mode with ``synchronous=FULL``, one row per commit into a table without indexes. Each commit
is one fsync, so its rate is what this disk allows a writer that waits for durability one
row at a time; it drifts with the machine's load, which is why it is measured again right
before and right after every figure (see :mod:`bench.rounds`).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from bench.harness import Run

# About as long as a stored signal, so a commit writes what an emit writes.
ROW = f"a row about as long as a stored signal {'x' * 200}"


class RawSQLite:
    """One connection to its own database file, kept open across measurements."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute("CREATE TABLE raw (id INTEGER PRIMARY KEY, body TEXT)")

    def close(self) -> None:
        self.connection.close()

    def commits(self, seconds: float) -> Run:
        """Commit one row at a time for ``seconds``; the latency of each commit."""
        latencies = []
        started = time.perf_counter()
        deadline = started + seconds
        while (begun := time.perf_counter()) < deadline:
            self.connection.execute("BEGIN IMMEDIATE")
            self.connection.execute("INSERT INTO raw (body) VALUES (?)", (ROW,))
            self.connection.execute("COMMIT")
            latencies.append(time.perf_counter() - begun)
        return Run(len(latencies), time.perf_counter() - started, latencies)
