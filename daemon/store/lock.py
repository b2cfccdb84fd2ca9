"""One daemon per store: a lock taken at start and held for the daemon's life.

Two daemons delivering from one database would both apply every signal (the bus's cursor
is per store, not per process). SQLite: an exclusive ``flock`` on ``<database>.lock``, a
file that names the holder's pid. PostgreSQL: a session advisory lock, keyed by the schema
the tables live in, on a connection kept open and named by its ``application_name`` (until
the bus can share a database between daemons, one daemon per store).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool


class StoreInUse(RuntimeError):
    """Another daemon holds the store; the message names it."""


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
        elif make_url(self.url).get_backend_name() == "postgresql":
            self._held = _advisory_lock(self.url)

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


class _PostgresLock:
    def __init__(self, url: str) -> None:
        self.engine = create_engine(url, poolclass=NullPool)
        self.connection = self.engine.connect()

    def close(self) -> None:
        self.connection.close()
        self.engine.dispose()


def _advisory_lock(url: str) -> _PostgresLock:
    held = _PostgresLock(url)
    name = f"cambium pid {os.getpid()}"
    connection = held.connection
    connection.execute(text("SELECT set_config('application_name', :name, false)"), {"name": name})
    schema = connection.execute(text("SELECT current_schema()")).scalar() or ""
    # A 62-bit key from the schema's name: stores in other schemas keep clear of each other.
    key = int.from_bytes(hashlib.sha256(f"cambium:{schema}".encode()).digest()[:8]) >> 2
    taken = connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key})
    if taken.scalar():
        connection.commit()
        return held
    holder = connection.execute(
        text(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted"
            " AND ((l.classid::bigint << 32) | l.objid::bigint) = :key"
        ),
        {"key": key},
    ).scalar()
    held.close()
    raise StoreInUse(
        f"another daemon ({holder or 'unknown'}) is using the PostgreSQL schema {schema}; "
        "stop it first, or give this one its own [store] url"
    )
