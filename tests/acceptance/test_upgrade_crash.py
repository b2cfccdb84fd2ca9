"""A crash during an upgrade leaves the store at a revision, and the next upgrade finishes.

A store at revision 0004 with many real rows (signals and their per-receptor deliveries, as
wave 1 wrote them) is upgraded by the real ``cambium db upgrade`` in a subprocess, which is
SIGKILLed at several points: after delays spread over the time a whole upgrade takes, and
right after each revision's progress line (inside that revision's transaction, just before
its commit). After each kill, ``cambium db upgrade`` must succeed and the store must hold
exactly what an upgrade that was never interrupted gives. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
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


def start_upgrade(url: str, tmp_path: Path) -> subprocess.Popen[str]:
    config = tmp_path / f"{uuid.uuid4().hex[:8]}.toml"
    config.write_text(f'[store]\nurl = "{url}"\n')
    return subprocess.Popen(
        [CAMBIUM, "db", "upgrade", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
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


def kill_at_progress(line: str, url: str, tmp_path: Path) -> None:
    """SIGKILL the upgrade as soon as it reports ``line`` (the revision is applied, its
    transaction not yet committed)."""
    upgrading = start_upgrade(url, tmp_path)
    assert upgrading.stderr is not None
    seen = []
    for said in upgrading.stderr:
        seen.append(said.strip())
        if said.startswith(line):
            os.kill(upgrading.pid, signal.SIGKILL)
            break
    upgrading.wait()
    upgrading.stderr.close()
    assert any(s.startswith(line) for s in seen), f"no progress line {line!r}: {seen}"


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
        lambda url, r=r: kill_at_progress(f"revision {r} applied", url, tmp_path)
        for r in ("0005", "0006")
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
    # The kills landed inside the upgrade, not only before or after it.
    assert "0004" in left_at and "0005" in left_at, left_at
