"""The bus end to end: signals per second from emit to a delivered mark, in process and over
the Unix socket, beside the two floors that bound it on this disk and this server.

- raw SQLite (WAL, ``synchronous=FULL``): one row per commit, and 100 rows per commit, into
  a table without indexes; and what one emit writes (a signal and its delivery) into the
  daemon's own tables, one emit per commit;
- in process: a :class:`SignalBus` with the observation receptor on a SQLite file, 1 and 8
  concurrent emitters, timed from the first emit until :meth:`SignalBus.drained`;
- over the socket: the real daemon, 1 and 8 client threads POSTing ``/v1/signals``, timed
  until ``/v1/health`` shows nothing pending; and, with 8 client threads, the same daemon's
  cheapest endpoint (``GET /v1/health``, which still reads the store) and a bare request
  (``GET`` of an unknown path, answered 404 by the router without any work).

Every signal is an observation of its own (1,000 subjects), so every one makes a mark. The
in-process bus logs at warning (its own cost, without a JSON line per delivery); the daemon
logs as configured by default (info: one line per delivery, to its log file).

    .venv/bin/python -m bench.bus
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from bench.harness import get_rate, observation, post_signals, scratch, wait_drained
from bench.report import Figure, Part, at_least, main_for, percentiles
from daemon.bus import SignalBus
from daemon.logs import configure_logging
from daemon.store import Store
from daemon.store.migrate import upgrade
from daemon.testing import DaemonHome
from receptors.observation import ObservationReceptor

RAW_SECONDS = 2.0
NOOP_SECONDS = 3.0
IN_PROCESS = {1: 3_000, 8: 10_000}  # emitters: signals
OVER_SOCKET = {1: 1_500, 8: 6_000}


@dataclass(frozen=True)
class Throughput:
    """``count`` signals acknowledged and delivered in ``seconds``."""

    count: int
    seconds: float
    latencies: list[float]

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    def figures(self, label: str) -> list[Figure]:
        p50, p99 = percentiles(self.latencies)
        return [
            Figure(f"{label}, end to end", self.rate, "signals/s"),
            Figure(f"{label}, ack p50", p50 * 1000, "ms"),
            Figure(f"{label}, ack p99", p99 * 1000, "ms"),
        ]


def commits_per_second(path: Path, transaction: Callable[[sqlite3.Connection, int], None]) -> float:
    """How often plain sqlite3 (WAL, ``synchronous=FULL``) commits ``transaction(n)``."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    commits = 0
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < RAW_SECONDS:
        connection.execute("BEGIN IMMEDIATE")
        transaction(connection, commits)
        connection.execute("COMMIT")
        commits += 1
    connection.close()
    return commits / elapsed


def raw_rows(path: Path, rows_per_commit: int) -> float:
    """Rows per second of plain inserts into a table without indexes."""
    rows = [(f"a row about as long as a stored signal {'x' * 200}",)] * rows_per_commit
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE raw (id INTEGER PRIMARY KEY, body TEXT)")
    connection.close()

    def insert(connection: sqlite3.Connection, _: int) -> None:
        connection.executemany("INSERT INTO raw (body) VALUES (?)", rows)

    return rows_per_commit * commits_per_second(path, insert)


def raw_schema(path: Path) -> float:
    """Commits per second of what one emit writes (a signal row and its delivery row) in
    plain sqlite3 on the daemon's own tables and indexes: the floor under the bus."""
    upgrade(f"sqlite:///{path}")
    now = "2026-11-30 12:00:00.000000"

    def emit(connection: sqlite3.Connection, n: int) -> None:
        signal_id = uuid.uuid4().hex  # random, like the bus's ids
        connection.execute(
            "INSERT INTO signals (id, type, class, source_layer, source_id, workspace_id, "
            "intensity, decay_rate, cascade_potential, payload, affinity, emitted_at, "
            "stored_at) VALUES (?, 'memory.observation', 'knowledge', 'agent', 'bench', "
            "'default', 0.7, 1209600.0, 0, ?, '[]', ?, ?)",
            (signal_id, json.dumps(observation(n)["payload"]), now, now),
        )
        connection.execute(
            "INSERT INTO deliveries (signal_id, receptor, status, attempts, created_at, "
            "updated_at) VALUES (?, 'observation', 'pending', 0, ?, ?)",
            (signal_id, now, now),
        )

    return commits_per_second(path, emit)


async def in_process(path: Path, emitters: int, count: int) -> Throughput:
    url = f"sqlite:///{path}"
    upgrade(url)
    store = Store(url)
    store.start()
    latencies: list[float] = []
    try:
        async with SignalBus(store, [ObservationReceptor()]) as bus:

            async def emitter(first: int) -> None:
                for n in range(first, count, emitters):
                    sent = time.perf_counter()
                    await bus.emit_raw(observation(n))  # validated, as the ingress does
                    latencies.append(time.perf_counter() - sent)

            started = time.perf_counter()
            async with anyio.create_task_group() as tasks:
                for first in range(emitters):
                    tasks.start_soon(emitter, first)
            await bus.drained()
            seconds = time.perf_counter() - started
    finally:
        store.close()
    return Throughput(count, seconds, latencies)


def over_socket(daemon: DaemonHome, start: int, count: int, clients: int) -> Throughput:
    started = time.perf_counter()
    latencies = post_signals(daemon.socket, start, count, clients)
    wait_drained(daemon.socket)
    return Throughput(count, time.perf_counter() - started, latencies)


def run() -> Part:
    configure_logging("warning", json=True)
    with scratch() as root:
        raw_one = raw_rows(root / "raw-1.db", 1)
        raw_hundred = raw_rows(root / "raw-100.db", 100)
        floor = raw_schema(root / "raw-schema.db")
        local = {
            emitters: anyio.run(in_process, root / f"bus-{emitters}.db", emitters, count)
            for emitters, count in IN_PROCESS.items()
        }
        with DaemonHome(root / "daemon") as daemon:
            noop = get_rate(daemon.socket, "/v1/health", 8, NOOP_SECONDS)
            bare = get_rate(daemon.socket, "/no-such-path", 8, NOOP_SECONDS, expect=404)
            remote, start = {}, 0
            for clients, count in OVER_SOCKET.items():
                remote[clients] = over_socket(daemon, start, count, clients)
                start += count
    figures = [
        Figure("raw SQLite, 1 row/commit", raw_one, "rows/s"),
        Figure("raw SQLite, 100 rows/commit", raw_hundred, "rows/s"),
        Figure("raw SQLite, real schema, signal + delivery/commit", floor, "commits/s"),
        Figure("socket no-op GET /v1/health, 8 clients", noop, "req/s"),
        Figure("socket bare GET (404), 8 clients", bare, "req/s"),
    ]
    for emitters, result in local.items():
        figures += result.figures(f"in-process, {emitters} emitter{'s' * (emitters > 1)}")
    for clients, result in remote.items():
        figures += result.figures(f"socket, {clients} client{'s' * (clients > 1)}")
    figures += [
        at_least("in-process 1 emitter / raw 1-row", local[1].rate / raw_one, 0.4),
        Figure("raw real-schema emit / raw 1-row", floor / raw_one, "x"),
        at_least("in-process 8 emitters / raw 1-row", local[8].rate / raw_one, 2.0),
        at_least("socket 8 clients / no-op GET", remote[8].rate / noop, 0.5),
        Figure("socket 8 clients / bare GET", remote[8].rate / bare, "x"),
    ]
    return Part("bus", figures)


if __name__ == "__main__":
    main_for(run)
