"""Group commit: one thread owns the write connection and commits many callers' work at once.

Callers submit *jobs* (functions of a :class:`Connection`). The writer takes everything that
is queued, runs it in one transaction, commits (for SQLite with ``synchronous=FULL``: one
fsync), and only then answers each caller. Under load this turns N fsyncs into one; alone,
it costs one thread hop.

If any job in a batch raises, the batch is rolled back and its jobs are run again one
transaction each, so one caller's failure never undoes another's work. A job may therefore
run more than once inside a rolled-back transaction: it must touch only the connection and
communicate only through its return value.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import structlog
from sqlalchemy.engine import Connection, Engine

T = TypeVar("T")
Job = Callable[[Connection], Any]

log = structlog.get_logger("cambium.writer")

_STOP = object()


class WriterClosed(RuntimeError):
    """The writer is stopped; nothing was written."""


class Writer:
    def __init__(self, engine: Engine, *, max_batch: int = 512) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.batches = 0
        self.jobs = 0

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
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join()
        self._thread = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    async def submit(self, job: Callable[[Connection], T]) -> T:
        """Run ``job`` in the next batch; return its result once the batch is durable."""
        if self._closed or self._thread is None:
            raise WriterClosed("the store writer is not running")
        future: Future[T] = Future()
        self._queue.put((job, future))
        return await asyncio.wrap_future(future)

    def _run(self) -> None:
        with self.engine.connect() as connection:
            while True:
                batch, stopping = self._next_batch()
                if batch:
                    self._commit(connection, batch)
                if stopping:
                    return

    def _next_batch(self) -> tuple[list[tuple[Job, Future[Any]]], bool]:
        batch: list[tuple[Job, Future[Any]]] = []
        item = self._queue.get()
        while True:
            if item is _STOP:
                return batch, True
            job, future = item
            if future.set_running_or_notify_cancel():  # skip callers that gave up
                batch.append((job, future))
            if len(batch) >= self.max_batch:
                return batch, False
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return batch, False

    def _commit(self, connection: Connection, batch: list[tuple[Job, Future[Any]]]) -> None:
        self.batches += 1
        self.jobs += len(batch)
        try:
            with connection.begin():
                results = [job(connection) for job, _ in batch]
        except Exception as exc:
            if connection.in_transaction():
                connection.rollback()
            if len(batch) == 1:
                batch[0][1].set_exception(exc)
                return
            log.debug("batch failed; running its jobs one by one", jobs=len(batch), error=str(exc))
            for single in batch:
                self._commit(connection, [single])
            return
        for (_, future), result in zip(batch, results, strict=True):
            future.set_result(result)
