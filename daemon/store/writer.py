"""Group commit: one thread owns the write connection and commits many callers' work at once.

Callers submit work; the writer takes everything that is queued, runs it in one
transaction, commits (for SQLite with ``synchronous=FULL``: one fsync), and only then
answers each caller. Under load this turns N fsyncs into one. Alone, it would cost two thread
hand-overs: a lone emit on SQLite is committed on its caller's thread instead, while the
writer is idle and the disk quick.

Work comes in two shapes. A *job* is a function of a :class:`Connection`. An *item* is a
value for a *batch function* ``(connection, items) -> results``: consecutive items for the
same batch function are handed to it together, so N emits become one multi-row INSERT.

Work that only records what is derived from durable work (a receptor's effects together with
its delivery's done-mark) may be submitted with ``durable=False``: a transaction holding
only such work commits without waiting for fsync. If power is lost before a later durable
commit flushes it, it is lost whole, and the delivery it marked done is simply delivered
again. Anything an acknowledgement depends on stays durable.

If anything in a transaction raises, it is rolled back and its work is run again one
caller per transaction, so one caller's failure never undoes another's. Work may therefore
run more than once inside a rolled-back transaction: it must touch only the connection and
communicate only through its return value.
"""

from __future__ import annotations

import asyncio
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from itertools import groupby
from typing import Any, TypeVar

import structlog
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from daemon.store import recent_marks
from daemon.store.errors import WriterClosed
from daemon.store.fast_path import Raw

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741
BatchFunction = Callable[[Connection, Sequence[Any]], Sequence[Any]]

log = structlog.get_logger("cambium.writer")

_STOP = object()

# A lone emit is committed on its caller's thread (see ``Writer._commit_here``) only while
# the last durable commit took at most this long: the event loop waits for that commit.
COMMIT_HERE_SECONDS = 0.002


def _ok() -> None:
    pass


def _run_jobs(connection: Connection, jobs: Sequence[Callable[[Connection], Any]]) -> list[Any]:
    return [job(connection) for job in jobs]


def _store_failed(exc: Exception) -> bool:
    """Whether the database, not the work, failed (SQLite's "database or disk is full" or
    "readonly database", a PostgreSQL connection lost), as opposed to, say, a constraint."""
    return isinstance(exc, OperationalError) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    )


# A transaction PostgreSQL rolled back to break a deadlock (40P01) or a serialisation
# conflict (40001) is run again this many times before its caller hears of it.
MAX_CONFLICT_RETRIES = 3


def _conflicted(exc: BaseException) -> bool:
    return isinstance(exc, DBAPIError) and getattr(exc.orig, "sqlstate", None) in {
        "40P01",
        "40001",
    }


class _Work:
    __slots__ = ("batch_function", "durable", "future", "item")

    def __init__(
        self, batch_function: BatchFunction, item: Any, durable: bool, future: asyncio.Future[Any]
    ) -> None:
        self.batch_function = batch_function
        self.item = item
        self.durable = durable
        self.future = future

    def answer(self, result: Any, error: BaseException | None) -> None:
        """On the caller's event loop: answer the caller, unless it gave up waiting."""
        if self.future.done():
            return
        if error is not None:
            self.future.set_exception(error)
        else:
            self.future.set_result(result)


def _answer_all(answers: list[tuple[_Work, Any, BaseException | None]]) -> None:
    for work, result, error in answers:
        work.answer(result, error)


def _wake_callers(answers: list[tuple[_Work, Any, BaseException | None]]) -> None:
    # One wake-up of each waiting event loop for the whole batch, not one per caller.
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Work, Any, BaseException | None]]]
    by_loop = {}
    for answer in answers:
        by_loop.setdefault(answer[0].future.get_loop(), []).append(answer)
    for loop, answered in by_loop.items():
        with suppress(RuntimeError):  # that loop is closed: nobody is waiting any more
            loop.call_soon_threadsafe(_answer_all, answered)


@contextmanager
def _transaction(connection: Connection, durable: bool) -> Iterator[None]:
    """One transaction of the writer, committed or rolled back (the exception goes on).

    On SQLite, BEGIN and COMMIT go straight to the driver: SQLAlchemy's own transaction
    costs as much again as both (each emit's commit pays it). A Core statement run inside
    autobegins SQLAlchemy's transaction on top of the open one (the engine's ``begin``
    hook leaves the driver's alone); it then commits through SQLAlchemy."""
    if connection.dialect.name != "sqlite":
        with connection.begin():
            if not durable:
                connection.exec_driver_sql("SET LOCAL synchronous_commit = off")
            yield
        return
    raw = Raw(connection)
    mirror = recent_marks.install(raw.driver, connection.connection.info)
    raw.execute("BEGIN IMMEDIATE").close()
    if mirror is not None:
        mirror.begin(recent_marks.data_version(raw.driver))
    try:
        yield
    except BaseException:
        if mirror is not None:
            mirror.rollback()
        if connection.in_transaction():
            connection.rollback()
        elif raw.driver.in_transaction:
            raw.execute("ROLLBACK").close()
        raise
    if connection.in_transaction():
        connection.commit()
    else:
        raw.execute("COMMIT").close()
    if mirror is not None:
        mirror.commit()


class Writer:
    def __init__(
        self, engine: Engine, *, max_batch: int = 512, before_commit: Callable[[], None] = _ok
    ) -> None:
        self.engine = engine
        self.before_commit = before_commit
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        # Closing and queueing exclude each other: nothing is queued behind the stop.
        self._gate = threading.Lock()
        # Work submitted in the current turn of each event loop, handed over at its end.
        self._handing_over: dict[asyncio.AbstractEventLoop, list[_Work]] = {}
        self._synchronous_full: bool | None = None  # SQLite's setting on the connection
        # Held while a transaction runs, on the writer's thread or a caller's.
        self._busy = threading.Lock()
        self._connection: Connection | None = None  # the writer's, while it runs
        self._commit_here_ok = engine.dialect.name == "sqlite"
        self._last_durable_commit = math.inf  # seconds
        self.batches = 0
        self.jobs = 0
        # Set while a transaction waits for the database's write lock (see :meth:`let_in`).
        self.beginning = False
        # Why the last transaction could not be written (a full disk, a read-only or lost
        # store), until one is written again; a caller's own failing work is not counted.
        self.failure: Exception | None = None

    def let_in(self, longest: float = 1.0) -> None:
        """Wait, at most ``longest`` seconds, while a transaction of the writer waits for the
        write lock: another connection's transactions back to back keep it out, for SQLite's
        busy handler looks again only every 25-100 ms (a note waited 5 s beside the start's
        indexing of 100,000 marks)."""
        deadline = time.monotonic() + longest
        while self.beginning and time.monotonic() < deadline:
            time.sleep(0.001)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="cambium-writer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Finish what is queued, then stop."""
        if self._thread is None:
            return
        with self._gate:
            self._closed = True
            self._queue.put(_STOP)
        self._thread.join()
        self._thread = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    async def submit(self, job: Callable[[Connection], T], *, durable: bool = True) -> T:
        """Run ``job`` in the next transaction; return its result once that is committed
        (and durable, unless ``durable=False``)."""
        result: T = await self.submit_item(_run_jobs, job, durable=durable)
        return result

    async def submit_item(
        self,
        batch_function: Callable[[Connection, Sequence[I]], Sequence[T]],
        item: I,
        *,
        durable: bool = True,
    ) -> T:
        """Hand ``item`` to ``batch_function`` together with its queued neighbours; return
        this item's result once the transaction is committed."""
        loop = asyncio.get_running_loop()
        if self._closed or self._thread is None:
            raise WriterClosed("the store writer is not running")
        work = _Work(batch_function, item, durable, loop.create_future())
        # One hand-over per turn of the caller's event loop: the emits one turn runs (say,
        # the emitters an answered batch woke) reach the writer together and make one
        # batch, instead of the first waking it alone and the rest waiting for the next.
        waiting = self._handing_over.get(loop)
        if waiting is None:
            waiting = self._handing_over[loop] = []
            loop.call_soon(self._hand_over, loop)
        waiting.append(work)
        result: T = await work.future
        return result

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        works = self._handing_over.pop(loop)
        if len(works) == 1 and self._commit_here(works[0]):
            return
        with self._gate:
            if not (self._closed or self._thread is None):
                self._queue.put(works)
                return
        closed = WriterClosed("the store writer is not running")
        for work in works:
            work.answer(None, closed)

    def _commit_here(self, work: _Work) -> bool:
        """Commit a lone batched item (an emit) on the caller's thread, at the end of the
        event loop's turn, when no batch is forming: the writer is idle, nothing is queued,
        the store is SQLite and its last durable commit was quick. That saves the two
        thread hand-overs, which cost more CPU than the emit's own statements; the loop
        waits out the commit instead, so a slow disk sends work back to the writer's
        thread. Whether it did (if not, hand the work over as usual)."""
        if (
            work.batch_function is _run_jobs  # a job may wait on anything: never on the loop
            or not self._commit_here_ok
            or self._last_durable_commit > COMMIT_HERE_SECONDS
            or not self._queue.empty()
            or not self._busy.acquire(blocking=False)
        ):
            return False
        answers: list[tuple[_Work, Any, BaseException | None]] = []
        try:
            connection = self._connection
            if connection is None or self._closed:
                return False
            if not work.future.done():  # (the caller gave up)
                self._timed_commit(connection, [work], answers)
        finally:
            self._busy.release()
        _answer_all(answers)
        return True

    def _run(self) -> None:
        with self.engine.connect() as connection:
            with self._busy:
                self._connection = connection
            try:
                while True:
                    batch, stopping = self._next_batch()
                    if batch:
                        answers: list[tuple[_Work, Any, BaseException | None]] = []
                        with self._busy:
                            self._timed_commit(connection, batch, answers)
                        # Free before any caller wakes: its next lone emit may commit there.
                        _wake_callers(answers)
                    if stopping:
                        return
            finally:
                with self._busy:
                    self._connection = None

    def _next_batch(self) -> tuple[list[_Work], bool]:
        batch: list[_Work] = []
        handed = self._queue.get()
        while True:
            if handed is _STOP:
                return batch, True
            # skip callers that gave up
            batch.extend(work for work in handed if not work.future.done())
            if len(batch) >= self.max_batch:
                return batch, False
            try:
                handed = self._queue.get_nowait()
            except queue.Empty:
                return batch, False

    def _timed_commit(
        self,
        connection: Connection,
        batch: list[_Work],
        answers: list[tuple[_Work, Any, BaseException | None]],
    ) -> None:
        started = time.perf_counter()
        self._commit_into(connection, batch, answers)
        if any(work.durable for work in batch):
            self._last_durable_commit = time.perf_counter() - started

    def _commit_into(
        self,
        connection: Connection,
        batch: list[_Work],
        answers: list[tuple[_Work, Any, BaseException | None]],
        conflicts: int = 0,
    ) -> None:
        self.batches += 1
        self.jobs += len(batch)
        durable = any(work.durable for work in batch)
        try:
            self.before_commit()
        except Exception as exc:  # the store cannot take this batch: nothing is written
            self.failure = exc
            answers.extend((work, None, exc) for work in batch)
            return
        try:
            self._set_durability(connection, durable)
            self.beginning = True
            with _transaction(connection, durable):
                self.beginning = False
                results = []
                for function, group in groupby(batch, key=lambda work: work.batch_function):
                    items = [work.item for work in group]
                    results.extend(function(connection, items))
        except Exception as exc:
            self.beginning = False
            if connection.in_transaction():
                connection.rollback()
            if len(batch) == 1:
                if _conflicted(exc) and conflicts < MAX_CONFLICT_RETRIES:
                    # PostgreSQL chose this transaction as a deadlock's (or a serialisation
                    # conflict's) victim and rolled it back whole: running it again is safe.
                    self._commit_into(connection, batch, answers, conflicts + 1)
                    return
                if _store_failed(exc):
                    self.failure = exc
                answers.append((batch[0], None, exc))
                return
            log.debug("batch failed; running its work one by one", jobs=len(batch), error=str(exc))
            for work in batch:
                self._commit_into(connection, [work], answers)
            return
        self.failure = None
        answers.extend((work, result, None) for work, result in zip(batch, results, strict=True))

    def _set_durability(self, connection: Connection, durable: bool) -> None:
        """SQLite: fsync at commit (FULL) or leave it to the next FULL commit or checkpoint
        (NORMAL, which in WAL mode keeps the database consistent, just not this commit)."""
        if connection.dialect.name != "sqlite" or self._synchronous_full is durable:
            return
        # On the raw connection: through SQLAlchemy the PRAGMA would open a transaction.
        driver = connection.connection.driver_connection
        assert driver is not None
        driver.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        self._synchronous_full = durable
