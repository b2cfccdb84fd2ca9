"""One daemon per SQLite store: a lock taken at start and held for the daemon's life.

Two daemons delivering from one SQLite file would both apply every signal, and SQLite has
one writer anyway: an exclusive ``flock`` on ``<database>.lock``, a file that names the
holder's pid, refuses the second. PostgreSQL stores take several daemons (a fleet): each
receptor is owned through a lease on its cursor (:mod:`daemon.bus.leases`), and
:func:`migration_lock` keeps two daemons from migrating the schema at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from daemon.store.errors import StoreInUse


class StoreLock:
    def __init__(self, url: str) -> None:
        self.url = url
        parsed = make_url(url)
        self._sqlite_path = (
            Path(parsed.database).expanduser()
            if parsed.get_backend_name() == "sqlite" and parsed.database
            else None
        )
        self._held: Any = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`StoreInUse` naming the daemon that has it."""
        if self._sqlite_path is not None:
            self._held = _lock_file(self._sqlite_path.with_name(self._sqlite_path.name + ".lock"))

    def release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.close()


def _lock_file(path: Path) -> Any:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    lock = os.fdopen(descriptor, "r+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = lock.read().strip() or "unknown"
        lock.close()
        raise StoreInUse(
            f"another daemon (pid {holder}) is using the database {path.with_suffix('')}; "
            "stop it first, or give this one its own [store] url"
        ) from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


@contextmanager
def migration_lock(url: str) -> Iterator[None]:
    """On PostgreSQL, one migration at a time: a session advisory lock keyed by the schema
    the tables live in (stores in other schemas keep clear of each other). Elsewhere, none
    is needed (SQLite's daemon holds the file lock)."""
    if make_url(url).get_backend_name() != "postgresql":
        yield
        return
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            schema = connection.execute(text("SELECT current_schema()")).scalar() or ""
            key = int.from_bytes(hashlib.sha256(f"cambium:{schema}".encode()).digest()[:8]) >> 2
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
            connection.commit()
            try:
                yield
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                connection.commit()
    finally:
        engine.dispose()
