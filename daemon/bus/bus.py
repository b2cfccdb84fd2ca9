"""The signal bus: persist before deliver, as a log with a cursor per receptor.

``emit`` validates nothing itself (a :class:`Signal` is valid by construction); it appends
the signal to the store's log through the group-committing writer and returns only once that
transaction is durable. A receptor whose whole effect is a write to the store, and that has
nothing older left to deliver, applies the signal inside that same transaction and moves its
cursor with it (the fast path). Every other delivery is made by the receptor's worker, which
reads the log after its cursor in order, so crash recovery is nothing special: whatever was
not settled when the process died lies after a cursor when it starts.
"""

from __future__ import annotations

import os
import random
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import structlog

from daemon.bus.leases import Leases
from daemon.bus.receptor import (
    DeliveryContext,
    Receptor,
    StoppedAt,
    StoreReceptor,
    Undeliverable,
)
from daemon.core.clock import Clock, utcnow
from daemon.core.signal import Signal
from daemon.store import Delivery, NewSignal, Store, Stored, Tx

T = TypeVar("T")

log = structlog.get_logger("cambium.bus")


class BusClosed(RuntimeError):
    """The bus is not accepting signals (not started, or shutting down)."""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter; after ``max_attempts`` failures a delivery is dead."""

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 60.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        ceiling: float = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)


@dataclass
class _Failure:
    delivery: Delivery
    position: int  # the receptor's cursor when it failed
    error: BaseException


@dataclass(frozen=True)
class _Appended:
    stored: Stored
    waiting: tuple[str, ...]  # receptors whose workers have this signal to deliver


class _CursorMoved(Exception):
    """Another worker (or daemon) settled what this one was about to."""


class SignalBus:
    def __init__(
        self,
        store: Store,
        receptors: Sequence[Receptor],
        *,
        workspace: str = "default",
        retry: RetryPolicy | None = None,
        clock: Clock = utcnow,
        batch_size: int = 256,
        grace_period: float = 10.0,
        linger: float = 0.002,
        owner: str | None = None,
        may_own: Iterable[str] | None = None,
        lease_seconds: float = 15.0,
    ) -> None:
        keys = [r.key for r in receptors]
        if len(set(keys)) != len(keys):
            raise ValueError(f"receptor keys must be unique: {keys}")
        self.store = store
        self.receptors = list(receptors)
        self.workspace = workspace
        self.retry_policy = retry or RetryPolicy()
        self.clock = clock
        self.batch_size = batch_size
        self.grace_period = grace_period
        self.linger = linger
        # Store receptors that may apply signals inside the emit's transaction.
        self._inline = [r for r in self.receptors if isinstance(r, StoreReceptor)]
        self._routes: dict[str, list[str]] = {}
        for receptor in self.receptors:
            for signal_type in receptor.binds:
                self._routes.setdefault(signal_type, []).append(receptor.key)
        self._wake: dict[str, anyio.Event] = {r.key: anyio.Event() for r in self.receptors}
        self._leases = Leases(
            store,
            owner or f"{socket.gethostname()}:{os.getpid()}",
            keys if may_own is None else may_own,
            lease_seconds,
            clock,
        )
        # What this daemon applies now; replaced whole (the writer thread reads it).
        self._owned: frozenset[str] = frozenset()
        self._progress = anyio.Event()
        self._stop = anyio.Event()
        self._accepting = False
        self._exit_stack: AsyncExitStack | None = None
        self._workers_done: anyio.Event | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        now = self.clock()
        await self.store.write(
            lambda tx: [tx.signals.register(r.key, r.binds, now) for r in self.receptors]
        )
        self._owned = await self._leases.renew()
        stack = AsyncExitStack()
        task_group = await stack.enter_async_context(anyio.create_task_group())
        self._exit_stack = stack
        self._stop = anyio.Event()
        self._workers_done = anyio.Event()
        remaining = len(self.receptors)

        async def run_worker(receptor: Receptor) -> None:
            nonlocal remaining
            try:
                await self._worker(receptor)
            finally:
                remaining -= 1
                if remaining == 0 and self._workers_done is not None:
                    self._workers_done.set()

        if not self.receptors:
            self._workers_done.set()
        for receptor in self.receptors:
            task_group.start_soon(run_worker, receptor, name=f"receptor:{receptor.key}")
        if self._leases.shared:
            task_group.start_soon(self._keep_leases, name="leases")
            task_group.start_soon(self._hear_appends, name="appends")
        self._task_group = task_group
        self._accepting = True
        log.info(
            "bus started",
            receptors=[r.key for r in self.receptors],
            owned=sorted(self._owned),
            owner=self._leases.owner,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
        assert self._exit_stack is not None
        await self._exit_stack.__aexit__(exc_type, exc, tb)
        self._exit_stack = None

    async def close(self) -> None:
        """Stop accepting; let in-flight deliveries finish within the grace period; stop."""
        if not self._accepting and self._stop.is_set():
            return
        self._accepting = False
        self._stop.set()
        for event in self._wake.values():
            event.set()
        assert self._workers_done is not None
        with anyio.move_on_after(self.grace_period) as scope:
            await self._workers_done.wait()
        with suppress(Exception):  # let the fleet take over now rather than at expiry
            await self._leases.release()
        if scope.cancelled_caught:
            log.warning("grace period over; interrupting deliveries", seconds=self.grace_period)
            self._task_group.cancel_scope.cancel()  # (nothing may be awaited after this)
        log.info("bus stopped")

    @property
    def accepting(self) -> bool:
        return self._accepting

    @property
    def owned(self) -> frozenset[str]:
        """The receptors whose signals this daemon applies now (on PostgreSQL, through its
        leases; a fleet's other daemons apply the rest)."""
        return self._owned

    # -- emit -----------------------------------------------------------------------------

    async def emit(self, signal: Signal) -> Stored:
        """Append ``signal`` to the log; return once that is durable (and, on the fast
        path, the store receptors' effects with it)."""
        if not self._accepting:
            raise BusClosed("the bus is not accepting signals")
        if "workspace_id" not in signal.model_fields_set:
            signal = signal.model_copy(update={"workspace_id": self.workspace})
        appended: _Appended = await self.store.write_batched(
            self._append, NewSignal(signal, self.clock())
        )
        for key in appended.waiting:
            self._wake[key].set()
        return appended.stored

    def _append(self, tx: Tx, new: Sequence[NewSignal]) -> list[_Appended]:
        """In the writer's transaction: append, then apply on the fast path."""
        stored = tx.signals.append(new)
        appended = [
            (s.seq, n.signal) for s, n in zip(stored, new, strict=True) if s.seq is not None
        ]
        caught_up = self._apply_inline(tx, appended) if appended else set()
        results = [
            _Appended(
                s,
                ()
                if s.duplicate
                else tuple(k for k in self._routes.get(n.signal.type, ()) if k not in caught_up),
            )
            for s, n in zip(stored, new, strict=True)
        ]
        if any(result.waiting for result in results):
            tx.signals.announce_append()
        if appended:
            log.info("signals stored", count=len(appended), applied=sorted(caught_up))
        return results

    def _apply_inline(self, tx: Tx, appended: list[tuple[int, Signal]]) -> set[str]:
        """Apply the just-appended signals for each store receptor that has no backlog, in
        its own savepoint with its cursor. Which receptors are caught up afterwards; for the
        others, whatever was not applied is left to their workers."""
        caught_up: set[str] = set()
        now = self.clock()
        last = appended[-1][0]
        for receptor in self._inline:
            if receptor.key not in self._owned:
                continue
            mine = [(seq, signal) for seq, signal in appended if signal.type in receptor.binds]
            if not mine:
                continue
            position = tx.signals.backlog_free_position(receptor.key, receptor.binds, mine[0][0])
            if position is None:
                continue
            signals = [signal for _, signal in mine]
            try:
                self._apply_and_advance(tx, receptor, signals, position, last, now)
                caught_up.add(receptor.key)
                continue
            except StoppedAt as stop:
                failed_at = stop.index
            except Exception:  # the worker will try it, and record why it fails
                continue
            if failed_at > 0:  # keep what came before the signal that failed
                with suppress(Exception):
                    before = mine[failed_at][0] - 1
                    self._apply_and_advance(
                        tx, receptor, signals[:failed_at], position, before, now
                    )
        return caught_up

    @staticmethod
    def _apply_and_advance(
        tx: Tx,
        receptor: StoreReceptor,
        signals: list[Signal],
        position: int,
        to: int,
        now: datetime,
    ) -> None:
        with tx.signals.savepoint():
            receptor.apply_batch(tx, signals)
            if not tx.signals.advance(receptor.key, position, to, now):
                raise _CursorMoved(receptor.key)

    async def emit_raw(self, data: Any) -> Stored:
        """Validate untrusted input (a dict or JSON text) against the bus clock, then emit.
        Raises :class:`~daemon.core.signal.SignalRejected` and stores nothing if invalid."""
        return await self.emit(Signal.parse(data, now=self.clock()))

    async def retry(self, signal_id: str, receptor: str | None = None) -> list[str]:
        """Deliver a signal's dead deliveries again; returns the receptors revived."""
        now = self.clock()
        revived = await self.store.write(
            lambda tx: tx.signals.revive_dead(signal_id, now, receptor)
        )
        for key in revived:
            if key in self._wake:
                self._wake[key].set()
        return revived

    async def settled(self, signal_id: str) -> dict[str, str]:
        """Wait until no delivery of ``signal_id`` is pending; return each receptor's status.
        (Bound the wait with ``anyio.move_on_after``.)"""
        while True:
            progress = self._progress
            status = await self.store.read(lambda tx: tx.signals.status(signal_id))
            if "pending" not in status.values():
                return status
            await self._progress_or_a_while(progress)

    async def drained(self) -> None:
        """Wait until no delivery is pending anywhere."""
        while True:
            progress = self._progress
            if (await self.store.read(lambda tx: tx.signals.open_counts())).pending == 0:
                return
            await self._progress_or_a_while(progress)

    @staticmethod
    async def _progress_or_a_while(progress: anyio.Event) -> None:
        # Another daemon of a fleet may make the progress: look again now and then.
        with anyio.move_on_after(0.5):
            await progress.wait()

    # -- ownership ------------------------------------------------------------------------

    async def _keep_leases(self) -> None:
        while not self._stop.is_set():
            await self._pause(self._leases.seconds / 3)
            if self._stop.is_set():
                return
            try:
                owned = await self._leases.renew()
            except Exception as exc:  # the store is away: what we hold will expire
                log.error("lease renewal failed", error=repr(exc))
                continue
            if owned != self._owned:
                log.info("receptors owned", owned=sorted(owned), owner=self._leases.owner)
            self._owned = owned
            self._wake_owned()  # also catches any wake-up that went missing

    async def _hear_appends(self) -> None:
        async with anyio.create_task_group() as listening:
            listening.start_soon(self._listen)
            await self._stop.wait()
            listening.cancel_scope.cancel()

    async def _listen(self) -> None:
        from daemon.store.notify import listen_for_appends  # psycopg: PostgreSQL only

        while True:
            try:
                await listen_for_appends(self.store.url, self._wake_owned)
            except Exception as exc:
                log.error("listening for appends failed", error=repr(exc))
            await anyio.sleep(1.0)

    def _wake_owned(self) -> None:
        for key in self._owned:
            self._wake[key].set()

    # -- delivery -------------------------------------------------------------------------

    async def _worker(self, receptor: Receptor) -> None:
        while not self._stop.is_set():
            wake = self._wake[receptor.key] = anyio.Event()
            if receptor.key not in self._owned:
                await wake.wait()
                continue
            try:
                position, batch = await self.store.read(
                    lambda tx: tx.signals.next_deliveries(receptor.key, self.batch_size)
                )
                if not batch:
                    await wake.wait()
                    # Let signals arriving together be delivered together: one transaction
                    # for many instead of one each, at the cost of this much latency.
                    await anyio.sleep(self.linger)
                    continue
                failure = await self._deliver_batch(receptor, position, batch)
                if failure is not None:
                    await self._after_failure(receptor, failure)
            except Exception as exc:  # the store itself failed: wait, then try again
                log.error("delivery loop error", receptor=receptor.key, error=repr(exc))
                await self._pause(self.retry_policy.max_delay / 4)

    async def _deliver_batch(
        self, receptor: Receptor, position: int, batch: list[Delivery]
    ) -> _Failure | None:
        if isinstance(receptor, StoreReceptor) and len(batch) > 1 and not batch[0].revived:
            return await self._apply_store_batch(receptor, position, batch)
        for delivery in batch:
            if self._stop.is_set():
                return None
            failure = await self._deliver_one(receptor, position, delivery)
            if failure is not None:
                return failure
            if not delivery.revived:
                position = delivery.seq
        return None

    async def _apply_store_batch(
        self, receptor: StoreReceptor, position: int, batch: list[Delivery]
    ) -> _Failure | None:
        """Apply consecutive deliveries in one transaction with the cursor's move. If one
        fails, the transaction is undone and the ones before it are applied again without
        it; the failed one holds back the rest (per-receptor order)."""
        started = time.perf_counter()
        now = self.clock()

        def job(tx: Tx) -> None:
            if not tx.signals.settle(receptor.key, batch, position, now):
                raise _CursorMoved(receptor.key)
            receptor.apply_batch(tx, [d.signal for d in batch])

        try:
            await self.store.write(job, durable=False)
        except StoppedAt as stop:
            if stop.index == 0:
                return _Failure(batch[0], position, stop.error)
            failure = await self._apply_store_batch(receptor, position, batch[: stop.index])
            return failure or _Failure(batch[stop.index], batch[stop.index - 1].seq, stop.error)
        except _CursorMoved:
            return None  # settled elsewhere: read the log again
        except Exception:
            return await self._deliver_each(receptor, position, batch)
        self._log_batch(receptor, batch, time.perf_counter() - started)
        self._announce_progress()
        return None

    async def _deliver_each(
        self, receptor: Receptor, position: int, batch: list[Delivery]
    ) -> _Failure | None:
        """No index to go by: one transaction each."""
        for delivery in batch:
            failure = await self._deliver_one(receptor, position, delivery)
            if failure is not None:
                return failure
            position = delivery.seq
        return None

    async def _deliver_one(
        self, receptor: Receptor, position: int, delivery: Delivery
    ) -> _Failure | None:
        started = time.perf_counter()

        def mark_done(tx: Tx) -> None:
            if not tx.signals.settle(receptor.key, [delivery], position, self.clock()):
                raise RuntimeError(
                    f"delivery of {delivery.signal.id} to {receptor.key} is no longer pending"
                )

        async def commit(job: Callable[[Tx], T]) -> T:
            def with_done_mark(tx: Tx) -> T:
                mark_done(tx)  # first: if it was done already, the job must not run
                return job(tx)

            return await self.store.write(with_done_mark, durable=False)

        async def save_checkpoint(checkpoint: dict[str, Any]) -> None:
            now = self.clock()
            await self.store.write(lambda tx: tx.signals.save_checkpoint(delivery, checkpoint, now))

        context = DeliveryContext(
            seq=delivery.seq,
            attempt=delivery.attempts + 1,
            checkpoint=delivery.checkpoint,
            now=self.clock,
            commit=commit,
            save_checkpoint=save_checkpoint,
        )
        try:
            await receptor.deliver(delivery.signal, context)
            if not context.committed:
                await self.store.write(mark_done, durable=False)
        except Exception as exc:
            return _Failure(delivery, position, exc)
        self._log_batch(receptor, [delivery], time.perf_counter() - started)
        self._announce_progress()
        return None

    async def _after_failure(self, receptor: Receptor, failure: _Failure) -> None:
        delivery = failure.delivery
        attempt = delivery.attempts + 1
        error = str(failure.error) or repr(failure.error)
        permanent = isinstance(failure.error, Undeliverable)
        dead = permanent or attempt >= self.retry_policy.max_attempts
        delay = 0.0 if dead else self.retry_policy.delay(attempt)
        now = self.clock()
        retry_at = None if dead else now + timedelta(seconds=delay)
        recorded = await self.store.write(
            lambda tx: tx.signals.record_failure(delivery, failure.position, error, now, retry_at),
            durable=False,
        )
        if not recorded:
            log.info("settled elsewhere", signal_id=delivery.signal.id, receptor=receptor.key)
            self._announce_progress()
            return
        log.warning(
            "delivery failed",
            signal_id=delivery.signal.id,
            signal_type=delivery.signal.type,
            receptor=receptor.key,
            attempt=attempt,
            outcome="dead" if dead else "retrying",
            error=error,
            retry_in=delay or None,
        )
        if dead:
            self._announce_progress()
        else:
            await self._pause(delay)

    async def _pause(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await self._stop.wait()

    def _announce_progress(self) -> None:
        progress, self._progress = self._progress, anyio.Event()
        progress.set()

    def _log_batch(self, receptor: Receptor, batch: list[Delivery], duration: float) -> None:
        log.info(
            "delivered",
            receptor=receptor.key,
            count=len(batch),
            first_signal_id=batch[0].signal.id,
            last_seq=batch[-1].seq,
            duration_ms=round(duration * 1000, 3),
        )
