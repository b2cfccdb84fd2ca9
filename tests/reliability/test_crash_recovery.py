"""SIGKILL the real daemon at random moments while four emitters stream observations to it
over its Unix socket, then start it again, several times over.

Each emitter retries a signal through the outage, with the same ``idempotency_key``, until
it is acknowledged (a signal stored just before the kill, whose answer was lost, comes back
as a duplicate with its original id). After every restart, every signal acknowledged so
far is stored under its key and applied exactly once: each signal says something no other
says, so it must make exactly one mark, which names it in ``evidence.signal_ids``, and no
mark is ever reinforced (a second application would reinforce its own mark). At the end
the store holds exactly the acknowledged signals and nothing is pending or dead.

The kill moments are drawn from a seeded random generator; the seed is printed, and a
failure can be replayed with ``CAMBIUM_CRASH_SEED``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from observations import observation

from daemon.store import DeliveryCounts, Store
from daemon.testing import DaemonHome, running

pytestmark = pytest.mark.subprocess  # starts `cambium` as a subprocess

EMITTERS = 4
RUN = "crash"
PATIENCE = 120.0  # seconds: a bound on waiting for progress, never a timing assertion


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting: {what}")
        time.sleep(0.01)


class Emitters:
    """Four threads posting their share of the signals, each one until acknowledged; with
    several daemons, the threads are spread over them."""

    def __init__(self, homes: Sequence[DaemonHome], count: int, run: str = RUN) -> None:
        self.homes = homes
        self.count = count
        self.run = run
        self.acknowledged: dict[str, str] = {}  # idempotency key -> signal id
        self.lock = threading.Lock()
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._run, args=(first,), daemon=True)
            for first in range(EMITTERS)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(PATIENCE)
        assert not self.errors, self.errors

    def snapshot(self) -> dict[str, str]:
        with self.lock:
            return dict(self.acknowledged)

    def at_least(self, count: int) -> bool:
        with self.lock:
            return len(self.acknowledged) >= count

    def _run(self, first: int) -> None:
        try:
            with self.homes[first % len(self.homes)].client() as client:
                for n in range(first, self.count, EMITTERS):
                    self._emit(client, observation(self.run, n))
        except BaseException as exc:
            self.errors.append(exc)

    def _emit(self, client: httpx.Client, signal_body: dict[str, object]) -> None:
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            try:
                response = client.post("/v1/signals", json=signal_body, timeout=30)
            except httpx.TransportError:  # the daemon is down or going down: try again
                time.sleep(0.01)
                continue
            if response.status_code == 503:  # shutting down or not yet up: try again
                time.sleep(0.01)
                continue
            assert response.status_code in (200, 201), response.text
            with self.lock:
                self.acknowledged[str(signal_body["idempotency_key"])] = response.json()["id"]
            return
        raise AssertionError(f"never acknowledged: {signal_body['idempotency_key']}")


class Database:
    """Reads the daemon's store directly (on SQLite, WAL lets it read beside the daemon)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _rows(self, sql: str) -> list[tuple[Any, ...]]:
        store = Store(self.url)
        try:
            return store.read_sync(
                lambda tx: [tuple(r) for r in tx.connection.exec_driver_sql(sql)]
            )
        finally:
            store.close()

    def stored(self) -> dict[str, str]:
        rows = self._rows("SELECT idempotency_key, id FROM signals")
        return {str(key): str(signal_id) for key, signal_id in rows}

    def applications(self) -> Counter[str]:
        """How many marks name each signal as their evidence."""
        counts: Counter[str] = Counter()
        for (evidence,) in self._rows("SELECT evidence FROM memory_marks"):
            found = json.loads(evidence) if isinstance(evidence, str) else evidence
            counts.update(found["signal_ids"])
        return counts

    def reinforcements(self) -> int:
        return int(self._rows("SELECT count(*) FROM memory_mark_reinforcements")[0][0])

    def open_deliveries(self) -> DeliveryCounts:
        """Pending and dead deliveries, derived from the cursors as the daemon derives them."""
        store = Store(self.url)
        try:
            return store.read_sync(lambda tx: tx.signals.open_counts())
        finally:
            store.close()


def drained(home: DaemonHome) -> bool:
    pending: int = home.get("/v1/health").json()["deliveries"]["pending"]
    return pending == 0


def check_applied_once(database: Database, acknowledged: dict[str, str]) -> None:
    stored = database.stored()
    assert {key: stored.get(key) for key in acknowledged} == acknowledged, (
        "every acknowledged signal is stored, under its key"
    )
    wait_until(
        lambda: set(acknowledged.values()) <= set(database.applications()),
        "every acknowledged signal applied",
    )
    twice = {i: n for i, n in database.applications().items() if n != 1}
    assert not twice, f"applied more than once: {twice}"
    assert database.reinforcements() == 0, "no signal was applied to its own mark again"


def crash_repeatedly(home: DaemonHome, count: int, kills: int) -> None:
    seed = int(os.environ.get("CAMBIUM_CRASH_SEED", random.randrange(2**32)))
    print(f"CAMBIUM_CRASH_SEED={seed}")
    rng = random.Random(seed)
    database = Database(home.db_url or f"sqlite:///{home.root / 'cambium.db'}")
    emitters = Emitters([home], count)
    with running(home):
        emitters.start()
        for threshold in sorted(rng.sample(range(count // 10, count * 9 // 10), kills)):
            wait_until(partial(emitters.at_least, threshold), f"{threshold} acknowledged")
            time.sleep(rng.uniform(0, 0.05))  # somewhere in the stream, not at a boundary
            acknowledged = emitters.snapshot()
            assert home.stop(signal.SIGKILL) == -signal.SIGKILL
            home.start()
            check_applied_once(database, acknowledged)
        check_the_end(database, emitters, [home])


def check_the_end(database: Database, emitters: Emitters, homes: Sequence[DaemonHome]) -> None:
    """Once every emitter is done and the daemons have caught up: all acknowledged, each
    applied once, nothing else stored, nothing pending or dead."""
    emitters.join()
    for home in homes:
        wait_until(partial(drained, home), "nothing pending")
    acknowledged = emitters.snapshot()
    assert len(acknowledged) == emitters.count
    check_applied_once(database, acknowledged)
    assert database.stored() == acknowledged, "nothing stored that was not acknowledged"
    assert database.open_deliveries() == DeliveryCounts(0, 0), "nothing pending, nothing dead"


def test_sigkill_while_streaming_loses_nothing_and_applies_once(tmp_path: Path) -> None:
    crash_repeatedly(DaemonHome(tmp_path), count=1_000, kills=3)


def test_sigkill_on_postgresql_loses_nothing_and_applies_once(
    tmp_path: Path, postgres_url: str
) -> None:
    crash_repeatedly(DaemonHome(tmp_path, db_url=postgres_url), count=1_000, kills=3)


@pytest.mark.slow
def test_sigkill_five_times_during_five_thousand_signals(tmp_path: Path) -> None:
    crash_repeatedly(DaemonHome(tmp_path), count=5_000, kills=5)
