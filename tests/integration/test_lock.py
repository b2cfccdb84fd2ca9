"""One daemon per SQLite store: the lock a daemon holds for its life."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from daemon.store import StoreInUse, StoreLock


def test_a_second_holder_is_refused_and_told_the_first_ones_pid(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path}/cambium.db"
    first = StoreLock(db_url)
    first.acquire()
    try:
        with pytest.raises(StoreInUse, match=rf"another daemon \(\D*{os.getpid()}\)"):
            StoreLock(db_url).acquire()
    finally:
        first.release()
    again = StoreLock(db_url)
    again.acquire()  # released: free for the next daemon
    again.release()


def test_daemons_share_a_postgresql_store(postgres_url: str) -> None:
    # A fleet: ownership is per receptor, through leases (tests/test_fleet.py).
    first, second = StoreLock(postgres_url), StoreLock(postgres_url)
    first.acquire()
    second.acquire()
    first.release()
    second.release()
    assert (first._held, second._held) == (None, None)


def test_the_sqlite_lock_file_is_private(tmp_path: Path) -> None:
    lock = StoreLock(f"sqlite:///{tmp_path}/data/cambium.db")
    lock.acquire()
    try:
        path = tmp_path / "data" / "cambium.db.lock"
        assert path.stat().st_mode & 0o777 == 0o600
        assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700
        assert path.read_text().strip() == str(os.getpid())
    finally:
        lock.release()
