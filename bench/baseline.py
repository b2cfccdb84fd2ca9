"""The raw SQLite baseline every durable figure is measured against: plain ``sqlite3`` in WAL
mode with ``synchronous=FULL``, one row per commit into a table without indexes. Each commit
is one fsync, so its rate is what this disk allows a writer that waits for durability one
row at a time; it drifts with the machine's load, which is why it is measured again right
before and right after every figure (see :mod:`bench.rounds`).

Beside it, :class:`ObservationFloor`: the same disk doing only the rows an observation must
write, which bounds from above what any bus can reach here.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sqlite3
import time
from pathlib import Path

from bench.harness import Run

# About as long as a stored signal, so a commit writes what an emit writes.
ROW = f"a row about as long as a stored signal {'x' * 200}"
MARKS_LATER_BATCH = 64


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


class ObservationFloor:
    """The least any bus could do per observation on this disk, as plain ``sqlite3`` with
    no validation, no event loop and no threads: append the signal (its id unique, indexed
    by type and sequence), look its fingerprint up among the marks, insert the mark, and
    commit ``per_commit`` of them at a time (1 is one emitter; 8 is eight emitters' group
    commit at its best). The tables are narrower than the store's and have fewer indexes, so
    this is an upper bound: a design on top of it can only be slower.

    With ``marks_later``, the floor of the other design: each durable commit carries only
    the signals, and the marks follow in batches of :data:`MARKS_LATER_BATCH` in commits
    that do not wait for fsync (the next durable commit flushes them). An acknowledgement
    then no longer means the mark is there."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.executescript(
            """
            CREATE TABLE signals (seq INTEGER PRIMARY KEY, id TEXT UNIQUE, type TEXT,
                                  payload TEXT, stored_at TEXT);
            CREATE INDEX ix_signals_type_seq ON signals (type, seq);
            CREATE TABLE marks (id TEXT PRIMARY KEY, subject TEXT, observation TEXT,
                                fingerprint TEXT, evidence TEXT, strength REAL,
                                created_at TEXT);
            CREATE INDEX ix_marks_fingerprint ON marks (fingerprint);
            CREATE TABLE cursors (receptor TEXT PRIMARY KEY, position INTEGER);
            INSERT INTO cursors VALUES ('observation', 0);
            """
        )
        self.numbers = itertools.count()

    def close(self) -> None:
        self.connection.close()

    def observations(self, per_commit: int, seconds: float, *, marks_later: bool = False) -> Run:
        execute = self.connection.execute
        count = 0
        unmarked: list[tuple[int, str, dict[str, str], str]] = []
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            execute("BEGIN IMMEDIATE")
            for _ in range(per_commit):
                n = next(self.numbers)
                signal_id = f"signal-{n}"
                payload = {"subject": f"topic{n % 1000}", "observation": f"observation {n}"}
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                (seq,) = execute(
                    "INSERT INTO signals (id, type, payload, stored_at) VALUES (?, ?, ?, ?)"
                    " RETURNING seq",
                    (signal_id, "memory.observation", json.dumps(payload), stamp),
                ).fetchone()
                unmarked.append((seq, signal_id, payload, stamp))
            if not marks_later:
                self._mark(unmarked)
                unmarked = []
            execute("COMMIT")
            count += per_commit
            if len(unmarked) >= MARKS_LATER_BATCH:
                self._mark_without_fsync(unmarked)
                unmarked = []
        if unmarked:
            self._mark_without_fsync(unmarked)
        return Run(count, time.perf_counter() - started)

    def _mark_without_fsync(self, unmarked: list[tuple[int, str, dict[str, str], str]]) -> None:
        execute = self.connection.execute
        execute("PRAGMA synchronous=NORMAL")
        execute("BEGIN IMMEDIATE")
        self._mark(unmarked)
        execute("COMMIT")
        execute("PRAGMA synchronous=FULL")

    def _mark(self, unmarked: list[tuple[int, str, dict[str, str], str]]) -> None:
        execute = self.connection.execute
        for _, signal_id, payload, stamp in unmarked:
            fingerprint = hashlib.sha256(payload["observation"].encode()).hexdigest()
            execute("SELECT id FROM marks WHERE fingerprint = ? LIMIT 1", (fingerprint,))
            execute(
                "INSERT INTO marks VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    f"mark-{signal_id}",
                    payload["subject"],
                    payload["observation"],
                    fingerprint,
                    json.dumps({"signal_ids": [signal_id]}),
                    0.5,
                    stamp,
                ),
            )
        last_seq = unmarked[-1][0]
        execute("UPDATE cursors SET position = ? WHERE receptor = 'observation'", (last_seq,))
