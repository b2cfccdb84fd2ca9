"""One daemon per store: the lock a daemon holds for its life."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from daemon.store.lock import StoreInUse, StoreLock


def test_a_second_holder_is_refused_and_told_the_first_ones_pid(db_url: str) -> None:
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
