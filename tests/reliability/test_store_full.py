"""The database cannot be written: the real daemon, its SQLite file on a disk that fills up.

Mechanism: the database lives on a small tmpfs mounted for the test (tests run as root
here; without the right to mount, the test is skipped, saying why). Once the daemon is up
and has stored a first signal, the WAL is checkpointed and truncated, so that the next
commit must grow a file, and the rest of the tmpfs is filled with a ballast file. SQLite
then fails exactly as on a full disk (``SQLITE_FULL``, "database or disk is full"). This
was chosen over a test-only hook (``PRAGMA max_page_count`` on the writer connection)
because it needs no change to the daemon and goes through the real process and socket.

While the disk is full every emit is answered 503 and never acknowledged, nothing is
stored, and the daemon keeps serving; once the ballast is deleted, the same signals are
acknowledged, stored and applied.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from observations import observation

from daemon.testing import DaemonHome, running

pytestmark = pytest.mark.subprocess  # starts `cambium` as a subprocess

TMPFS_SIZE = "8m"
RUN = "fulldisk"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "--lazy", str(mount_point)], check=True)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` with a ballast file."""
    ballast = disk / "ballast"
    chunk = b"\0" * 65_536
    with ballast.open("wb", buffering=0) as file:
        try:
            while file.write(chunk):  # a short write when nearly full; then ENOSPC
                pass
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    assert os.statvfs(disk).f_bavail == 0
    return ballast


def truncate_wal(database: Path) -> None:
    """Checkpoint the WAL into the database and truncate it, so the next commit must
    allocate disk space for the WAL again."""
    with sqlite3.connect(database) as connection:
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0, "the daemon held a read transaction open"


def assert_full(database: Path) -> None:
    """SQLite itself now fails to commit into ``database``, as on a full disk."""
    with (
        pytest.raises(sqlite3.OperationalError, match="database or disk is full"),
        sqlite3.connect(database) as connection,
    ):
        connection.execute("CREATE TABLE probe (x)")


def stored_keys(database: Path) -> set[str]:
    with sqlite3.connect(database) as connection:
        rows = connection.execute("SELECT idempotency_key FROM signals").fetchall()
    return {str(key) for (key,) in rows}


def test_full_disk_refuses_emits_with_503_and_recovers(tmp_path: Path, small_disk: Path) -> None:
    database = small_disk / "cambium.db"
    home = DaemonHome(tmp_path / "home", db_url=f"sqlite:///{database}")
    with running(home):
        first = home.post("/v1/signals?wait=10", observation(RUN, 0))
        assert first.status_code == 201, first.text
        assert first.json()["deliveries"] == {"observation": "delivered"}

        truncate_wal(database)
        ballast = fill(small_disk)
        assert_full(database)
        for n in (1, 2, 3):
            refused = home.post("/v1/signals", observation(RUN, n))
            assert refused.status_code == 503, refused.text
            assert "cannot be written" in refused.json()["detail"]
        assert home.process is not None and home.process.poll() is None, "the daemon is up"
        health = home.get("/v1/health")
        assert health.status_code == 200 and health.json()["status"] == "degraded", "serving"
        assert stored_keys(database) == {f"{RUN}-0"}, "nothing refused was stored"

        ballast.unlink()
        for n in (1, 2, 3):
            accepted = home.post("/v1/signals?wait=10", observation(RUN, n))
            assert accepted.status_code == 201, accepted.text
            assert accepted.json()["duplicate"] is False
            assert accepted.json()["deliveries"] == {"observation": "delivered"}
        recalled = home.get("/v1/recall", about=RUN, layers="marks").json()
        assert len(recalled["marks"]) == 4
    assert stored_keys(database) == {f"{RUN}-{n}" for n in range(4)}
