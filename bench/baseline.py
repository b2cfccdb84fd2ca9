"""The raw SQLite baseline every durable figure is measured against: plain ``sqlite3`` in WAL
mode with ``synchronous=FULL``, one row per commit into a table without indexes. Each commit
is one fsync, so its rate is what this disk allows a writer that waits for durability one
row at a time; it drifts with the machine's load, which is why it is measured again right
before and right after every figure (see :mod:`bench.rounds`).

Beside it, :class:`ObservationFloor`: the least any bus could do per observation on this
disk, on the store's real schema of the day, measured *paired* with the raw commit (one raw
commit, then one floor commit, alternately, so the disk's drift falls on both alike).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sqlite3
import struct
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import JSON

from bench.harness import SUBJECTS, Run
from daemon.store.migrate import upgrade
from daemon.store.tables import MarkTable, SignalTable

WAL_HEADER = 32  # bytes before the first frame of a write-ahead log
WAL_FRAME_HEADER = 24  # bytes before each page in the log
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

    def commit(self) -> None:
        self.connection.execute("BEGIN IMMEDIATE")
        self.connection.execute("INSERT INTO raw (body) VALUES (?)", (ROW,))
        self.connection.execute("COMMIT")

    def commits(self, seconds: float) -> Run:
        """Commit one row at a time for ``seconds``; the latency and CPU of each commit."""
        latencies = []
        started, cpu = time.perf_counter(), time.process_time()
        deadline = started + seconds
        while (begun := time.perf_counter()) < deadline:
            self.commit()
            latencies.append(time.perf_counter() - begun)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        return Run(len(latencies), elapsed, latencies, cpu)


def _table_sql(table: str, columns: list[str]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


_SIGNAL_COLUMNS = [c.name for c in SignalTable.__table__.c if c.name != "seq"]  # type: ignore[attr-defined]
_MARK_COLUMNS = [c.name for c in MarkTable.__table__.c]  # type: ignore[attr-defined]
_MARK_JSON = {c.name for c in MarkTable.__table__.c if isinstance(c.type, JSON)}  # type: ignore[attr-defined]


class ObservationFloor:
    """Plain ``sqlite3`` on a store migrated to the real schema, doing only what an
    observation must: append the signal (every column the log keeps), look its fingerprint
    up and read the subject's recent marks through the marks' index, insert the mark (every
    column, its text queued for the index by the schema's own trigger), move the cursor;
    ``per_commit`` of them to a commit (1 is one emitter; 8 is eight emitters' group commit
    at its best). No validation, no event loop, no threads: a bus on this schema can only
    be slower.

    :meth:`paired` alternates one raw commit (:class:`RawSQLite`) with one floor commit, so
    both see the same disk at the same moments; the ratio of their rates is the floor's
    share of the raw commit, free of the drift between two separate measurements."""

    def __init__(self, path: Path) -> None:
        upgrade(f"sqlite:///{path}")
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute(
            "INSERT INTO receptor_cursors (receptor, binds, since, position, updated_at)"
            " VALUES ('observation', '[\"memory.observation\"]', 0, 0, '2026-12-02 00:00:00')"
        )
        self.numbers = itertools.count()

    def close(self) -> None:
        self.connection.close()

    def paired(self, raw: RawSQLite, per_commit: int, seconds: float) -> tuple[Run, Run]:
        """Raw and floor commits, alternately, for ``seconds``: (raw, floor) as runs (each
        with its CPU time), the floor's counted in observations."""
        raw_time = floor_time = raw_cpu = floor_cpu = 0.0
        raw_count = floor_count = 0
        deadline = time.perf_counter() + seconds
        while (begun := time.perf_counter()) < deadline:
            cpu = time.process_time()
            raw.commit()
            between, cpu_between = time.perf_counter(), time.process_time()
            self.commit(per_commit)
            raw_time += between - begun
            floor_time += time.perf_counter() - between
            raw_cpu += cpu_between - cpu
            floor_cpu += time.process_time() - cpu_between
            raw_count += 1
            floor_count += per_commit
        return (
            Run(raw_count, raw_time, cpu=raw_cpu),
            Run(floor_count, floor_time, cpu=floor_cpu),
        )

    def commit(self, per_commit: int) -> None:
        execute = self.connection.execute
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        execute("BEGIN IMMEDIATE")
        seq = 0
        for _ in range(per_commit):
            n = next(self.numbers)
            subject = f"bench.area{n % SUBJECTS // 20}.topic{n % 20}"
            text = f"observation number {n} about this topic"
            signal_id = f"{time.time_ns():032x}"
            payload = {"subject": subject, "observation": text, "evidence": {"note": "b"}}
            signal = {
                "id": signal_id,
                "type": "memory.observation",
                "class": "knowledge",
                "source_layer": "agent",
                "source_id": "bench",
                "workspace_id": "default",
                "intensity": 0.7,
                "decay_rate": 1209600.0,
                "cascade_potential": 0,
                "payload": json.dumps(payload, separators=(",", ":")),
                "affinity": "[]",
                "emitted_at": stamp,
                "stored_at": stamp,
            }
            (seq,) = execute(
                _table_sql("signals", _SIGNAL_COLUMNS) + " RETURNING seq",
                [signal.get(c) for c in _SIGNAL_COLUMNS],
            ).fetchone()
            fingerprint = hashlib.sha256(f"{subject}\x1f{text}".encode()).hexdigest()[:32]
            execute(
                "SELECT id FROM memory_marks WHERE workspace_id = ? AND subject = ?"
                " AND fingerprint = ? AND state IN ('active', 'withered', 'promoted') LIMIT 1",
                ("default", subject, fingerprint),
            ).fetchall()
            execute(
                "SELECT id, observation FROM memory_marks WHERE workspace_id = ? AND"
                " subject = ? AND state IN ('active', 'withered', 'promoted')"
                " ORDER BY last_reinforced_at DESC LIMIT 10",
                ("default", subject),
            ).fetchall()
            mark = {
                "id": f"mk_{signal_id}",
                "workspace_id": "default",
                "subject": subject,
                "observation": text,
                "fingerprint": fingerprint,
                "evidence": {"note": "b", "signal_ids": [signal_id]},
                "initial_strength": 0.7,
                "half_life_days": 14.0,
                "observed_by": "bench",
                "first_observed_at": stamp,
                "last_reinforced_at": stamp,
                "reinforcement_count": 0,
                "affinity": [],
                "substrate_refs": [],
                "state": "active",
                "provenance": "observed",
                "created_at": stamp,
                "updated_at": stamp,
            }
            execute(
                _table_sql("memory_marks", _MARK_COLUMNS),
                [
                    json.dumps(mark.get(c), separators=(",", ":"))
                    if c in _MARK_JSON
                    else mark.get(c)
                    for c in _MARK_COLUMNS
                ],
            )
        execute(
            "UPDATE receptor_cursors SET position = ?, updated_at = ? WHERE receptor = ?",
            (seq, stamp, "observation"),
        )
        execute("COMMIT")


class WalPages:
    """The pages written to an SQLite database's write-ahead log while it is counted,
    by the b-tree each belongs to (its table or index, ``sqlite_schema`` for the header page
    that holds the file's size). A reader holds the first snapshot meanwhile, so no
    checkpoint can start the log over: its growth is everything written. A count, not a
    rate: the same on a quiet machine or a busy one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.by_tree: Counter[str] = Counter()

    @contextmanager
    def counting(self) -> Iterator[None]:
        with closing(sqlite3.connect(self.path)) as reader:
            reader.execute("PRAGMA journal_mode=WAL")  # (a store's first connection would)
            page_size: int = reader.execute("PRAGMA page_size").fetchone()[0]
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM signals").fetchone()
            wal = self.path.with_name(f"{self.path.name}-wal")
            before = max(wal.stat().st_size if wal.exists() else 0, WAL_HEADER)
            yield
            written = wal.read_bytes()[before:]
            reader.execute("COMMIT")
            owners = dict(reader.execute("SELECT pageno, name FROM dbstat"))
        frame = WAL_FRAME_HEADER + page_size
        for start in range(0, len(written) - frame + 1, frame):
            (page,) = struct.unpack(">I", written[start : start + 4])
            self.by_tree[owners.get(page, "(free)")] += 1

    @property
    def total(self) -> int:
        return self.by_tree.total()


def floor_pages(path: Path, per_commit: int, commits: int) -> WalPages:
    """The pages the floor writes to the write-ahead log in ``commits`` commits."""
    floor = ObservationFloor(path)
    pages = WalPages(path)
    with pages.counting():
        for _ in range(commits):
            floor.commit(per_commit)
    floor.close()
    return pages
