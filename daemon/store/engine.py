"""Engines and the :class:`Store` facade: one writer, pooled readers.

SQLite runs in WAL mode with ``synchronous=FULL`` (a commit returns only after fsync) and a
busy timeout. Transactions are begun explicitly so SAVEPOINTs work and the writer takes the
write lock up front (``BEGIN IMMEDIATE``) instead of failing to upgrade a read lock later.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url

from daemon.store.writer import Writer

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000


def make_engine(url: str, *, writer: bool = False) -> Engine:
    """An engine for ``url``; with ``writer`` set, SQLite transactions begin IMMEDIATE."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
    begin = "BEGIN IMMEDIATE" if writer else "BEGIN"

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the sqlite3 module (it would BEGIN lazily and
        # break SAVEPOINT); SQLAlchemy's "begin" event below issues BEGIN itself.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql(begin)

    return engine


class Store:
    """The database as the daemon sees it: ``write`` goes through the one group-committing
    :class:`Writer`; ``read`` runs on a pooled connection in a worker thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.reader = make_engine(url)
        self.writer = Writer(make_engine(url, writer=True))

    @property
    def dialect(self) -> str:
        return self.reader.dialect.name

    def start(self) -> None:
        self.writer.start()

    def close(self) -> None:
        self.writer.stop()
        self.writer.engine.dispose()
        self.reader.dispose()

    async def write(self, job: Callable[[Connection], T], *, durable: bool = True) -> T:
        return await self.writer.submit(job, durable=durable)

    async def read(self, query: Callable[[Connection], T]) -> T:
        return await anyio.to_thread.run_sync(self.read_now, query)

    def read_now(self, query: Callable[[Connection], T]) -> T:
        """Synchronous read, for the CLI and for code already in a thread."""
        with self.reader.connect() as connection, connection.begin():
            return query(connection)

    def write_now(self, job: Callable[[Connection], T]) -> T:
        """Synchronous write in its own transaction, bypassing the writer thread.

        Only for code that runs without a bus (``cambium db upgrade``, tests' fixtures)."""
        with self.writer.engine.connect() as connection, connection.begin():
            return job(connection)
