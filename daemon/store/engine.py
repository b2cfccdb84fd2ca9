"""Engines and the :class:`Store` facade: one writer, pooled readers.

SQLite runs in WAL mode with ``synchronous=FULL`` (a commit returns only after fsync) and a
busy timeout. Transactions are begun explicitly so SAVEPOINTs work and the writer takes the
write lock up front (``BEGIN IMMEDIATE``) instead of failing to upgrade a read lock later.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, closing, nullcontext, suppress
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url

from daemon.core.turns import InTurn
from daemon.store.activity import Activity
from daemon.store.dense_rows import DenseRows
from daemon.store.errors import StoreCorrupt, StoreLost
from daemon.store.failure import describe_failure
from daemon.store.marks import Marks
from daemon.store.rhythm_state import RhythmState
from daemon.store.seeds import Seeds
from daemon.store.signals import SignalLog
from daemon.store.text_index import TextRows
from daemon.store.tombstones import Tombstones
from daemon.store.writer import BatchFunction, Writer

T = TypeVar("T")
Item = TypeVar("Item")

BUSY_TIMEOUT_MS = 10_000


def make_engine(url: str, *, writer: bool = False) -> Engine:
    """An engine for ``url``; with ``writer`` set, SQLite transactions begin IMMEDIATE."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        # Readers see one snapshot per transaction, as on SQLite: a read of a cursor and of
        # the log after it can never straddle a commit.
        isolation = "READ COMMITTED" if writer else "REPEATABLE READ"
        return create_engine(url, pool_pre_ping=True, isolation_level=isolation)
    if writer and parsed.database and parsed.database != ":memory:":
        _create_private(Path(parsed.database).expanduser())
    in_memory = parsed.database in (None, "", ":memory:")
    # A file's pool is last in, first out: recalls one after another take the connection
    # whose page cache the last one warmed (first in, first out, they went round every
    # pooled connection, each reading the index's pages again). A database in memory has
    # one connection a thread.
    engine = create_engine(
        url,
        connect_args={"timeout": BUSY_TIMEOUT_MS / 1000},
        **({} if in_memory else {"pool_use_lifo": True}),
    )
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
        # Freed and overwritten content is zeroed, so text that `memory.forget` erased does
        # not linger in free pages of the file.
        cursor.execute("PRAGMA secure_delete=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        # On the driver. The writer begins its own transactions there (a Core statement
        # inside one then joins it, see daemon.store.writer): only begin where none is open.
        driver: Any = connection.connection.driver_connection
        if not driver.in_transaction:
            driver.execute(begin)

    return engine


def _use_wal(path: Path) -> None:
    """Put the file in WAL mode once, before the writer's thread connects: a file the
    migrations just made is in rollback-journal mode, and two first connections switching
    it at once (the writer's and a reader's) can fail with "database is locked" at once,
    busy timeout or not."""
    with closing(sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")


def _create_private(path: Path) -> None:
    """The database file, private to the user (0600 in a 0700 directory it creates); SQLite
    gives its -wal and -shm files the database file's mode."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))


# Tables the start does not check: the text index and the stored vectors, which are rebuilt
# from the files and the marks (`cambium index rebuild`, the embedding worker). They are
# most of a large store's pages: checked too, three years of notes cost 1-5 s every start.
REBUILT_TABLES = ("text_", "dense_")


def check_sqlite_file(url: str) -> None:
    """At start: a SQLite file that is not a database, or whose memory's tables fail their
    quick check, is named as such (instead of failing later with a message that does not say
    what is wrong)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return
    path = Path(parsed.database).expanduser()
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
            tables = [
                name
                for (name,) in connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                    " AND name NOT LIKE 'sqlite_%'"
                )
                if not name.startswith(REBUILT_TABLES)
            ]
            problems = [
                problem
                for table in tables  # names from the file's own schema, quoted
                for (problem,) in connection.execute(f'PRAGMA quick_check("{table}")')
                if problem != "ok"
            ]
    except sqlite3.DatabaseError as exc:
        raise StoreCorrupt(f"{path} is not a usable SQLite database ({exc})") from None
    if problems:
        shown = "; ".join(problems[:5])
        raise StoreCorrupt(f"{path} is corrupt ({shown}); restore it from a backup")


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
    def tombstones(self) -> Tombstones:
        return Tombstones(self.connection)

    @property
    def activity(self) -> Activity:
        return Activity(self.connection)

    @property
    def rhythms(self) -> RhythmState:
        return RhythmState(self.connection)

    @property
    def text_index(self) -> TextRows:
        return TextRows(self.connection)

    @property
    def dense(self) -> DenseRows:
        return DenseRows(self.connection)


class Store:
    """The database as the daemon sees it. Work is a function of a :class:`Tx`: ``write``
    runs it in the one group-committing :class:`Writer`; ``read`` on a pooled connection in
    a worker thread; the ``_sync`` variants in the caller's thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._reader = make_engine(url)
        self._writer = Writer(make_engine(url, writer=True), before_commit=self._check_file)
        parsed = make_url(url)
        self._file = (
            Path(parsed.database).expanduser()
            if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, ":memory:")
            else None
        )
        self._identity: tuple[int, int] | None = None
        self._batch_functions: dict[Callable[..., Any], BatchFunction] = {}
        # write_sync's transactions one at a time, in turn, on SQLite (it has one writer
        # anyway); PostgreSQL runs them side by side, each locking its rows.
        self._side_writes: AbstractContextManager[None] = (
            InTurn() if self.dialect == "sqlite" else nullcontext()
        )

    @property
    def dialect(self) -> str:
        return self._reader.dialect.name

    @property
    def writer_alive(self) -> bool:
        return self._writer.alive

    @property
    def commits(self) -> int:
        """How many transactions this process's writer has run (committed or not): what a
        cache of the store's state is current against until the next one."""
        return self._writer.batches

    @property
    def write_failure(self) -> str | None:
        """Why the last write failed, in one line, until a write succeeds again."""
        failure = self._writer.failure
        return None if failure is None else describe_failure(self.url, failure)

    @property
    def in_memory(self) -> bool:
        """An SQLite database in memory: nothing persists, not even an index."""
        return self.dialect == "sqlite" and self._file is None

    def start(self) -> None:
        if self._file is not None and self._file.exists():
            info = self._file.stat()
            self._identity = (info.st_dev, info.st_ino)
            _use_wal(self._file)
        self._writer.start()

    @property
    def lost(self) -> bool:
        """Whether the database file is gone or replaced since :meth:`start`."""
        try:
            self._check_file()
        except StoreLost:
            return True
        return False

    def _check_file(self) -> None:
        # SQLite keeps writing to a deleted (unlinked) file and reports success: every
        # acknowledged write would vanish at the next start. Checked before each commit.
        if self._identity is None or self._file is None:
            return
        try:
            info = self._file.stat()
        except FileNotFoundError:
            raise StoreLost(f"the database {self._file} was deleted") from None
        if (info.st_dev, info.st_ino) != self._identity:
            raise StoreLost(f"the database {self._file} was replaced by another file")

    def close(self) -> None:
        self._writer.stop()
        self._writer.engine.dispose()
        self._reader.dispose()

    async def write_batched(
        self,
        batch_job: Callable[[Tx, Sequence[Item]], Sequence[T]],
        item: Item,
        *,
        durable: bool = True,
    ) -> T:
        """Hand ``item`` to ``batch_job`` together with the items queued beside it (one call,
        one transaction: how N emits become one commit); return this item's result once
        the transaction is committed (and durable, unless ``durable=False``). ``batch_job``
        must be the same function object every time for items to be batched together."""
        function = self._batch_functions.get(batch_job)
        if function is None:

            def function(connection: Connection, items: Sequence[Item]) -> Sequence[T]:
                return batch_job(Tx(connection), items)

            self._batch_functions[batch_job] = function
        result: T = await self._writer.submit_item(function, item, durable=durable)
        return result

    def scrub(self) -> None:
        """After erasing text (``memory.forget``): on SQLite, merge the marks' full-text
        index into one segment (what its ``'delete'`` entries cancelled leaves the file),
        then copy the write-ahead log into the database file and truncate it, so old page
        images holding the text are gone from disk too (the file's freed content is zeroed
        by ``secure_delete``). Best effort: a reader holding an old snapshot keeps the log
        until the next checkpoint."""
        if self._file is None:
            return
        self.write_sync(lambda tx: tx.text_index.optimize())
        with closing(sqlite3.connect(self._file, timeout=BUSY_TIMEOUT_MS / 1000)) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")

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

        Only for code that runs without a bus (``cambium db upgrade``, tests' fixtures) and
        for the text index's upkeep, which runs in the file layers' threads, outside the
        bus's transactions. A transaction of the writer waiting for the lock goes first,
        then this process's others in the order they came (:mod:`daemon.store.turns`)."""
        with self._side_writes:
            self._writer.let_in()
            with self._writer.engine.connect() as connection, connection.begin():
                return job(Tx(connection))
