"""Engines and the :class:`Store` facade: one writer, pooled readers.

SQLite runs in WAL mode with ``synchronous=FULL`` (a commit returns only after fsync) and a
busy timeout. Transactions are begun explicitly so SAVEPOINTs work and the writer takes the
write lock up front (``BEGIN IMMEDIATE``) instead of failing to upgrade a read lock later.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url

from daemon.store.marks import Marks
from daemon.store.rhythm_state import RhythmState
from daemon.store.seeds import Seeds
from daemon.store.signal_log import NewSignal, SignalLog, Stored
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


class Tx:
    """One transaction, and the repositories that work inside it."""

    __slots__ = ("connection",)

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    @property
    def signals(self) -> SignalLog:
        return SignalLog(self.connection)

    @property
    def marks(self) -> Marks:
        return Marks(self.connection)

    @property
    def seeds(self) -> Seeds:
        return Seeds(self.connection)

    @property
    def rhythms(self) -> RhythmState:
        return RhythmState(self.connection)


def _append_signals(connection: Connection, new: Sequence[NewSignal]) -> list[Stored]:
    return SignalLog(connection).append(new)


class Store:
    """The database as the daemon sees it. Work is a function of a :class:`Tx`: ``write``
    runs it in the one group-committing :class:`Writer`; ``read`` on a pooled connection in
    a worker thread; the ``_sync`` variants in the caller's thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._reader = make_engine(url)
        self._writer = Writer(make_engine(url, writer=True))

    @property
    def dialect(self) -> str:
        return self._reader.dialect.name

    @property
    def writer_alive(self) -> bool:
        return self._writer.alive

    def start(self) -> None:
        self._writer.start()

    def close(self) -> None:
        self._writer.stop()
        self._writer.engine.dispose()
        self._reader.dispose()

    async def append(self, new: NewSignal) -> Stored:
        """Store a signal with its deliveries; return once that is durable. Signals that
        arrive together are stored by one multi-row statement in one transaction."""
        stored: Stored = await self._writer.submit_item(_append_signals, new)
        return stored

    async def write(self, job: Callable[[Tx], T], *, durable: bool = True) -> T:
        return await self._writer.submit(lambda connection: job(Tx(connection)), durable=durable)

    async def read(self, query: Callable[[Tx], T]) -> T:
        return await anyio.to_thread.run_sync(self.read_sync, query)

    def read_sync(self, query: Callable[[Tx], T]) -> T:
        """Synchronous read, for the CLI and for code already in a thread."""
        with self._reader.connect() as connection, connection.begin():
            return query(Tx(connection))

    def write_sync(self, job: Callable[[Tx], T]) -> T:
        """Synchronous write in its own transaction, bypassing the writer thread.

        Only for code that runs without a bus (``cambium db upgrade``, tests' fixtures)."""
        with self._writer.engine.connect() as connection, connection.begin():
            return job(Tx(connection))
