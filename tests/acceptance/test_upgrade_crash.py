"""A crash during an upgrade leaves the store at a revision, and the next upgrade finishes.

A store at revision 0004 with many real rows (signals and their per-receptor deliveries, as
wave 1 wrote them) is upgraded by the real ``cambium db upgrade`` in a subprocess, which is
SIGKILLed at several points: after delays spread over the time a whole upgrade takes, inside
0005's transaction (its work done, its progress line being written, the commit not yet
made), and between 0005 and 0006 (0005 committed, 0006's progress line being written). After each
kill, ``cambium db upgrade`` must succeed and the store must hold exactly what an upgrade
that was never interrupted gives. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import POSTGRES_SKIP, POSTGRES_URL
from sqlalchemy import create_engine, text

from daemon.store.migrate import current_revision, head_revision, upgrade
from daemon.testing import CAMBIUM

SIGNALS = 20_000
FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.9)
T0 = datetime(2026, 11, 30, 12, 0)  # naive: wave 1 stored UTC without an offset
# "revision 0005 applied in 1.9 s\n" is 31 bytes: room for one such line, not for two.
ROOM_PER_LINE = 40


def build_wave_one_store(url: str) -> None:
    """Revision 0004, and SIGNALS signals each delivered to two receptors (some after
    failures, some dead, some pending), inserted as wave 1 did."""
    upgrade(url, "0004")
    signals, deliveries = [], []
    for n in range(SIGNALS):
        signal_id = f"s{n:06d}"
        stored = T0 + timedelta(milliseconds=n)
        signals.append({"id": signal_id, "stored": stored, "payload": f'{{"n": {n}}}'})
        for receptor, status, attempts in (
            ("observation", "delivered", 1 + n % 3),  # every third after two failures
            ("daily", ("delivered", "dead", "pending")[n % 3], n % 2),
        ):
            deliveries.append(
                {"id": signal_id, "receptor": receptor, "status": status, "attempts": attempts}
                | {"t": stored, "error": "disk full" if attempts else None}
            )
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO signals (id, type, class, source_layer, source_id, workspace_id,"
                " intensity, decay_rate, cascade_potential, payload, affinity, emitted_at,"
                " stored_at) VALUES (:id, 'memory.observation', 'knowledge', 'agent', 'ada',"
                " 'default', 0.7, 0, false, :payload, '[]', :stored, :stored)"
            ),
            signals,
        )
        connection.execute(
            text(
                "INSERT INTO deliveries (signal_id, receptor, status, attempts, last_error,"
                " created_at, updated_at) VALUES (:id, :receptor, :status, :attempts, :error,"
                " :t, :t)"
            ),
            deliveries,
        )
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("ANALYZE"))  # as autovacuum would have, on a store in use
    engine.dispose()


def contents(url: str) -> dict[str, object]:
    """What the upgrade made of the rows: enough to tell any lost or doubled one."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return {
                name: connection.execute(text(query)).all()
                for name, query in {
                    "signals": "SELECT count(*), count(DISTINCT id), min(seq), max(seq)"
                    " FROM signals",
                    "cursors": "SELECT receptor, since, position FROM receptor_cursors"
                    " ORDER BY receptor",
                    "failures": "SELECT receptor, status, count(*), sum(attempts)"
                    " FROM delivery_failures GROUP BY receptor, status ORDER BY 1, 2",
                }.items()
            }
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """Makes URLs of fresh, empty stores of one kind."""
    schemas: list[str] = []

    def sqlite() -> str:
        return f"sqlite:///{tmp_path / uuid.uuid4().hex[:8]}.db"

    def postgres() -> str:
        schema = f"t_{uuid.uuid4().hex[:12]}"
        schemas.append(schema)
        with admin.connect() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        separator = "&" if "?" in str(POSTGRES_URL) else "?"
        return f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"

    if request.param == "sqlite":
        yield sqlite
        return
    if not POSTGRES_URL:
        pytest.skip(POSTGRES_SKIP)
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        yield postgres
    finally:
        with admin.connect() as connection:
            for schema in schemas:
                connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def start_upgrade(url: str, tmp_path: Path, stderr: int = subprocess.PIPE) -> subprocess.Popen[str]:
    config = tmp_path / f"{uuid.uuid4().hex[:8]}.toml"
    config.write_text(f'[store]\nurl = "{url}"\n')
    return subprocess.Popen(
        [CAMBIUM, "db", "upgrade", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        text=True,
    )


def finish_upgrade(url: str, tmp_path: Path) -> None:
    resumed = start_upgrade(url, tmp_path)
    _, errors = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, f"the store is bricked: {errors.strip()}"


def kill_after(seconds: float, url: str, tmp_path: Path) -> None:
    upgrading = start_upgrade(url, tmp_path)
    try:
        upgrading.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        upgrading.send_signal(signal.SIGKILL)
    upgrading.wait()
    assert upgrading.stderr is not None
    upgrading.stderr.close()


def blocked_writing_stderr(pid: int) -> bool:
    """Whether the process sits in write(2, …): its stderr pipe is full."""
    return Path(f"/proc/{pid}/syscall").read_text().startswith("1 0x2 ")


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.001)


@contextmanager
def held_at_progress(url: str, tmp_path: Path, lines: int) -> Iterator[int]:
    """An upgrade whose stderr pipe has room for its first ``lines`` progress lines and no
    more: the next one, written inside its revision's transaction before the commit, blocks
    the upgrade there. Yields the child's pid once it is blocked: a kill lands at that
    point by construction, not by luck of timing. (A pipe's last page takes a write that
    fits in it; a write that does not waits for a free page, and none is free.)"""
    read_end, write_end = os.pipe()
    capacity = fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ)
    assert os.write(write_end, b"." * (capacity - lines * ROOM_PER_LINE)) > 0
    upgrading = start_upgrade(url, tmp_path, stderr=write_end)
    os.close(write_end)
    try:
        wait_until(lambda: blocked_writing_stderr(upgrading.pid), "blocked on its progress")
        yield upgrading.pid
    finally:
        upgrading.kill()
        upgrading.wait()
        os.close(read_end)


def kill_inside_revision(url: str, tmp_path: Path) -> None:
    """SIGKILL the upgrade inside 0005's transaction, its work done, before its commit."""
    with held_at_progress(url, tmp_path, lines=0) as pid:
        os.kill(pid, signal.SIGKILL)


def kill_between_revisions(url: str, tmp_path: Path) -> None:
    """SIGKILL the upgrade once 0005 committed, inside 0006's transaction."""
    with held_at_progress(url, tmp_path, lines=1) as pid:
        os.kill(pid, signal.SIGKILL)


def test_an_upgrade_killed_at_any_point_resumes_to_head_with_every_row(
    new_store: Callable[[], str], tmp_path: Path
) -> None:
    reference = new_store()
    build_wave_one_store(reference)
    started = time.monotonic()
    finish_upgrade(reference, tmp_path)
    whole = time.monotonic() - started
    expected = contents(reference)
    assert expected["signals"] == [(SIGNALS, SIGNALS, 1, SIGNALS)]
    started = time.monotonic()
    finish_upgrade(reference, tmp_path)  # at head already: the start-up alone
    start_up = time.monotonic() - started

    kills: list[Callable[[str], None]] = [
        lambda url, f=f: kill_after(start_up + f * max(whole - start_up, 0.1), url, tmp_path)
        for f in FRACTIONS
    ] + [
        lambda url: kill_inside_revision(url, tmp_path),
        lambda url: kill_between_revisions(url, tmp_path),
    ]
    left_at = []
    for kill in kills:
        url = new_store()
        build_wave_one_store(url)
        kill(url)
        left_at.append(current_revision(url))
        finish_upgrade(url, tmp_path)
        assert current_revision(url) == head_revision()
        assert contents(url) == expected
    # The kills landed inside the upgrade, not only before or after it: one inside
    # 0005's transaction (its work done, not committed) and one between revisions.
    assert left_at[-2:] == ["0004", "0005"], left_at
