"""The file layers keep the bus's promise (SPEC §13, issue 11), tried on the real daemon over
its real socket:

- appenders racing repeated consolidations of the same day: every ``OBS`` line becomes a
  mark (none archived unread) and is archived once (no duplicates);
- SIGKILL at random moments while notes and consolidations are in flight, merges included:
  every acknowledged note is in the day's files exactly once;
- symlinks planted at every daily and archive path: no file outside the daily directory
  changes (hashed before and after);
- a FIFO and a 100,000-deep JSON in every file layer: recall answers, and SIGTERM still
  stops the daemon with exit 0 within its grace period.

Kill moments come from a seeded generator; the seed is printed, and ``CAMBIUM_CRASH_SEED``
replays a run.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import threading
import time
from collections import Counter
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_crash_recovery import PATIENCE, Database, drained, wait_until

from daemon.testing import DaemonHome, running

pytestmark = pytest.mark.subprocess  # the real daemon as a subprocess

DAY = date(2026, 11, 28)
APPENDERS = 4


def note(text: str, key: str, day: date = DAY) -> dict[str, Any]:
    return {
        "type": "memory.daily_note",
        "source_id": "file-layers-test",
        "idempotency_key": key,
        "payload": {"text": text, "date": day.isoformat()},
    }


def consolidate(key: str, **payload: str) -> dict[str, Any]:
    return {
        "type": "memory.consolidate",
        "source_id": "file-layers-test",
        "idempotency_key": key,
        "payload": payload,
    }


def post_until_acknowledged(client: httpx.Client, body: dict[str, Any]) -> str:
    """Post ``body`` until the daemon acknowledges it (through restarts: same key)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        try:
            response = client.post("/v1/signals", json=body, timeout=30)
        except httpx.TransportError:
            time.sleep(0.01)
            continue
        if response.status_code == 503:
            time.sleep(0.01)
            continue
        assert response.status_code in (200, 201), response.text
        return str(response.json()["id"])
    raise AssertionError(f"never acknowledged: {body['idempotency_key']}")


class Threads:
    """Run ``work(index)`` in ``count`` threads; errors are collected and re-raised."""

    def __init__(self, count: int, work: Any) -> None:
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._run, args=(work, index), daemon=True)
            for index in range(count)
        ]

    def _run(self, work: Any, index: int) -> None:
        try:
            work(index)
        except BaseException as exc:
            self.errors.append(exc)

    def __enter__(self) -> Threads:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for thread in self.threads:
            thread.join(PATIENCE)
        assert not self.errors, self.errors


def day_lines(home: DaemonHome, day: date = DAY) -> list[str]:
    """Every line the day holds, archived or live (a claim left by a kill included)."""
    daily = home.root / "memory" / "daily"
    name = f"{day.isoformat()}.md"
    files = [daily / "archive" / name, daily / "archive" / f".{name}.incoming", daily / name]
    return [line for path in files if path.exists() for line in path.read_text().splitlines()]


def marks_by_subject(database: Database) -> Counter[str]:
    return Counter(
        str(subject) for (subject,) in database._rows("SELECT subject FROM memory_marks")
    )


# -- appenders racing consolidations --------------------------------------------------------


def race_appenders_and_consolidations(home: DaemonHome, lines: int) -> None:
    texts = [f"OBS subject=race.line{n} observation number {n}" for n in range(lines)]
    stop = threading.Event()
    with running(home), home.client() as consolidator_client:

        def append(index: int) -> None:
            with home.client() as client:
                for n in range(index, lines, APPENDERS):
                    post_until_acknowledged(client, note(texts[n], f"race-note-{n}"))

        rounds = 0

        def consolidate_repeatedly(_: int) -> None:
            nonlocal rounds
            while not stop.is_set():
                rounds += 1
                body = consolidate(f"race-consolidate-{rounds}", date=DAY.isoformat())
                post_until_acknowledged(consolidator_client, body)
                time.sleep(0.005)

        with Threads(1, consolidate_repeatedly):
            with Threads(APPENDERS, append):
                pass
            stop.set()
        # Receptors run independently: the last notes may still be on their way to the
        # file. Once they are all there, one more consolidation takes what is live.
        wait_until(partial(drained, home), "nothing pending")
        post_until_acknowledged(
            consolidator_client, consolidate("race-final", date=DAY.isoformat())
        )
        wait_until(partial(drained, home), "nothing pending")
        database = Database(f"sqlite:///{home.root / 'cambium.db'}")
        archived = day_lines(home)
        assert rounds > 1, "consolidations ran while notes were appended"
        duplicates = {line: n for line, n in Counter(archived).items() if n > 1}
        assert not duplicates, f"lines archived twice: {len(duplicates)}"
        assert sorted(archived) == sorted(texts), "every note is in the day's archive"
        marks = marks_by_subject(database)
        unread = [n for n in range(lines) if marks[f"race.line{n}"] != 1]
        assert not unread, f"OBS lines archived unread (or read twice): {len(unread)}"
        assert not (home.root / "memory" / "daily" / f"{DAY.isoformat()}.md").exists()


def test_appenders_racing_repeated_consolidations_lose_and_repeat_nothing(
    tmp_path: Path,
) -> None:
    race_appenders_and_consolidations(DaemonHome(tmp_path), lines=400)


@pytest.mark.slow
def test_appenders_racing_consolidations_twelve_thousand_lines(tmp_path: Path) -> None:
    race_appenders_and_consolidations(DaemonHome(tmp_path), lines=12_000)


# -- SIGKILL with notes and merges in flight ------------------------------------------------


def kill_during_merges(home: DaemonHome, notes: int, kills: int) -> None:
    seed = int(os.environ.get("CAMBIUM_CRASH_SEED", random.randrange(2**32)))
    print(f"CAMBIUM_CRASH_SEED={seed}")
    rng = random.Random(seed)
    texts = [f"OBS subject=kill.line{n} note number {n}" for n in range(notes)]
    acknowledged: set[int] = set()
    lock = threading.Lock()
    with running(home):
        # A day already archived, so that every later consolidation is a merge into it.
        with home.client() as client:
            post_until_acknowledged(client, note("the day began", "kill-first"))
            post_until_acknowledged(client, consolidate("kill-c0", date=DAY.isoformat()))

        def append(index: int) -> None:
            with home.client() as client:
                for n in range(index, notes, APPENDERS):
                    post_until_acknowledged(client, note(texts[n], f"kill-note-{n}"))
                    with lock:
                        acknowledged.add(n)
                    if n % 25 == index:
                        body = consolidate(f"kill-c-{n}", date=DAY.isoformat())
                        post_until_acknowledged(client, body)

        def count() -> int:
            with lock:
                return len(acknowledged)

        with Threads(APPENDERS, append):
            for threshold in sorted(rng.sample(range(notes // 10, notes * 9 // 10), kills)):
                wait_until(lambda t=threshold: count() >= t, f"{threshold} notes acknowledged")
                time.sleep(rng.uniform(0, 0.05))
                assert home.stop(signal.SIGKILL) == -signal.SIGKILL
                home.start()
        wait_until(partial(drained, home), "nothing pending")
        with home.client() as client:
            post_until_acknowledged(client, consolidate("kill-final", through=DAY.isoformat()))
        wait_until(partial(drained, home), "nothing pending")
        lines = day_lines(home)
        duplicates = {line: n for line, n in Counter(lines).items() if n > 1}
        assert not duplicates, f"duplicate lines after kills: {duplicates}"
        assert sorted(lines) == sorted(["the day began", *texts]), "no acknowledged note lost"
        assert Database(f"sqlite:///{home.root / 'cambium.db'}").open_deliveries().dead == 0


def test_sigkill_during_archive_merges_with_notes_in_flight_duplicates_nothing(
    tmp_path: Path,
) -> None:
    kill_during_merges(DaemonHome(tmp_path), notes=300, kills=2)


@pytest.mark.slow
def test_sigkill_ten_times_during_merges(tmp_path: Path) -> None:
    kill_during_merges(DaemonHome(tmp_path), notes=3_000, kills=10)


# -- symlinks at every daily and archive path -----------------------------------------------


def hashes_outside(home: DaemonHome, daily: Path) -> dict[str, str]:
    """Every file under the home but outside the daily directory, except what the daemon
    owns there (its database, log and socket)."""
    own = {"cambium.db", "cambium.db-wal", "cambium.db-shm", "cambium.db.lock", "daemon.log"}
    found = {}
    for path in sorted(home.root.rglob("*")):
        if daily in path.parents or path == daily or path.name in own or path.is_symlink():
            continue
        if path.is_file():
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def test_symlinks_planted_at_every_daily_and_archive_path_change_nothing_outside(
    tmp_path: Path,
) -> None:
    # Refused appends and merges fail for good: two attempts make them dead quickly.
    home = DaemonHome(tmp_path, extra_config="max_attempts = 2")
    daily = home.root / "memory" / "daily"
    archive = daily / "archive"
    archive.mkdir()
    target = home.root / "SOUL.md"
    target.write_text("# Soul\nThe user's own file.\n")
    (home.root / "memory" / "long-term" / "food.md").write_text("# Food\n")
    days = [date(2026, 11, day) for day in range(20, 27)]
    name = [f"{day.isoformat()}.md" for day in days]
    (daily / name[0]).symlink_to(target)  # the live file
    (daily / name[1]).symlink_to(home.root / "memory" / "long-term" / "new.md")  # dangling
    (archive / name[2]).symlink_to(target)  # the archived day
    (archive / f".{name[3]}.incoming").symlink_to(target)  # a claim
    (archive / name[4]).write_text("archived before\n")
    (archive / f".{name[4]}.merge").symlink_to(target)  # a merge record
    (archive / name[5]).write_text("archived before\n")
    (archive / f".{name[5]}.merge.tmp").symlink_to(target)  # a merge record being written
    before = hashes_outside(home, daily)
    with running(home), home.client() as client:
        for index, day in enumerate(days):
            post_until_acknowledged(client, note(f"a note {index}", f"sym-note-{index}", day))
            post_until_acknowledged(client, consolidate(f"sym-c-{index}", date=day.isoformat()))
        post_until_acknowledged(client, consolidate("sym-through", through=days[-1].isoformat()))
        wait_until(partial(drained, home), "nothing pending")
        assert home.get("/v1/recall", about="note", horizon="all").status_code == 200
    # Then the archive directory itself is a symlink to a directory outside.
    elsewhere = home.root / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / name[6]).write_text("not the daemon's\n")
    for path in archive.iterdir():
        path.unlink()
    archive.rmdir()
    archive.symlink_to(elsewhere)
    before_second = hashes_outside(home, daily)
    with running(home), home.client() as client:
        post_until_acknowledged(client, note("one more", "sym-note-last", days[6]))
        post_until_acknowledged(client, consolidate("sym-c-last", date=days[6].isoformat()))
        wait_until(partial(drained, home), "nothing pending")
    assert before == {k: v for k, v in before_second.items() if k in before}
    assert hashes_outside(home, daily) == before_second, "0 bytes written outside daily/"
    assert not (home.root / "memory" / "long-term" / "new.md").exists()
    assert sorted(p.name for p in elsewhere.iterdir()) == [name[6]]


# -- FIFOs and deep JSON in every layer -----------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_fifo_and_deep_json_in_every_layer_neither_hang_nor_fail_recall(
    tmp_path: Path,
) -> None:
    home = DaemonHome(tmp_path)
    memory = home.root / "memory"
    (memory / "long-term" / "food.md").write_text("# Food\nLentil soup.\n")
    (memory / "daily" / "archive").mkdir()
    (memory / "daily" / "2026-11-29.md").write_text("lentil soup for lunch\n")
    (memory / "compost" / "good.json").write_text("[]")
    for layer, fifo, deep in [
        ("long-term", "pipe.md", "deep.md"),
        ("daily", "2026-11-30.md", "2026-11-27.md"),
        ("daily/archive", "2026-11-26.md", "2026-11-25.md"),
        ("compost", "pipe.json", "deep.json"),
    ]:
        os.mkfifo(memory / layer / fifo)
        (memory / layer / deep).write_text(DEEP)
    os.mkfifo(home.root / "SOUL.md")  # a single-file substrate entry
    with running(home):
        for layers in ("substrate", "daily", "compost", "marks", "substrate,marks,daily,compost"):
            response = home.get("/v1/recall", about="lentil", layers=layers, horizon="all")
            assert response.status_code == 200, (layers, response.text)
        answer = home.get("/v1/recall", about="lentil", horizon="all").json()
        assert [hit["date"] for hit in answer["daily"]] == ["2026-11-29"]
        cli = home.cli("memory", "recall", "lentil", "--horizon", "all", "--json")
        assert cli.returncode == 0, cli.stderr
        assert home.stop(signal.SIGTERM) == 0, "SIGTERM stops it cleanly within the grace period"
