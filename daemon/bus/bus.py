"""The signal bus: persist before deliver.

``emit`` validates nothing itself (a :class:`Signal` is valid by construction); it hands the
signal and one delivery row per bound receptor to the store's group-committing writer and
returns only once that transaction is durable. Each receptor has one worker that reads its
pending deliveries from the store in persisted order, so crash recovery is nothing special:
whatever was pending when the process died is simply still pending when it starts.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import structlog

from daemon.bus.receptor import (
    DeliveryContext,
    Receptor,
    StoppedAt,
    StoreReceptor,
    Undeliverable,
)
from daemon.core.clock import Clock, utcnow
from daemon.core.signal import Signal
from daemon.store import Store, Tx
from daemon.store.signal_log import NewSignal, PendingDelivery, Stored

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
    delivery: PendingDelivery
    error: BaseException


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
        self._routes: dict[str, list[str]] = {}
        for receptor in self.receptors:
            for signal_type in receptor.binds:
                self._routes.setdefault(signal_type, []).append(receptor.key)
        self._wake: dict[str, anyio.Event] = {r.key: anyio.Event() for r in self.receptors}
        self._progress = anyio.Event()
        self._stop = anyio.Event()
        self._accepting = False
        self._exit_stack: AsyncExitStack | None = None
        self._workers_done: anyio.Event | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
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
        self._task_group = task_group
        self._accepting = True
        log.info("bus started", receptors=[r.key for r in self.receptors])
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
        if scope.cancelled_caught:
            log.warning("grace period over; interrupting deliveries", seconds=self.grace_period)
            self._task_group.cancel_scope.cancel()
        log.info("bus stopped")

    @property
    def accepting(self) -> bool:
        return self._accepting

    # -- emit -----------------------------------------------------------------------------

    async def emit(self, signal: Signal) -> Stored:
        """Store ``signal`` durably with its deliveries; return once committed."""
        if not self._accepting:
            raise BusClosed("the bus is not accepting signals")
        if "workspace_id" not in signal.model_fields_set:
            signal = signal.model_copy(update={"workspace_id": self.workspace})
        receptors = self._routes.get(signal.type, [])
        stored = await self.store.append(NewSignal(signal, receptors, self.clock()))
        if not stored.duplicate:
            for key in receptors:
                self._wake[key].set()
        return stored

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
            await progress.wait()

    async def drained(self) -> None:
        """Wait until no delivery is pending anywhere."""
        while True:
            progress = self._progress
            if (await self.store.read(lambda tx: tx.signals.open_counts())).pending == 0:
                return
            await progress.wait()

    # -- delivery -------------------------------------------------------------------------

    async def _worker(self, receptor: Receptor) -> None:
        while not self._stop.is_set():
            wake = self._wake[receptor.key] = anyio.Event()
            try:
                batch = await self.store.read(
                    lambda tx: tx.signals.pending(receptor.key, self.batch_size)
                )
                if not batch:
                    await wake.wait()
                    # Let signals arriving together be delivered together: one transaction
                    # for many instead of one each, at the cost of this much latency.
                    await anyio.sleep(self.linger)
                    continue
                failure = await self._deliver_batch(receptor, batch)
                if failure is not None:
                    await self._after_failure(receptor, failure)
            except Exception as exc:  # the store itself failed: wait, then try again
                log.error("delivery loop error", receptor=receptor.key, error=repr(exc))
                await self._pause(self.retry_policy.max_delay / 4)

    async def _deliver_batch(
        self, receptor: Receptor, batch: list[PendingDelivery]
    ) -> _Failure | None:
        if isinstance(receptor, StoreReceptor) and len(batch) > 1:
            return await self._apply_store_batch(receptor, batch)
        for delivery in batch:
            if self._stop.is_set():
                return None
            failure = await self._deliver_one(receptor, delivery)
            if failure is not None:
                return failure
        return None

    async def _apply_store_batch(
        self, receptor: StoreReceptor, batch: list[PendingDelivery]
    ) -> _Failure | None:
        """Apply consecutive deliveries in one transaction with their done-marks. If one
        fails, the transaction is undone and the ones before it are applied again without
        it; the failed one holds back the rest (per-receptor order)."""
        started = time.perf_counter()
        now = self.clock()

        def job(tx: Tx) -> None:
            done = tx.signals.mark_many_delivered([d.id for d in batch], now)
            if done != len(batch):
                raise RuntimeError("deliveries changed under the bus; applying one by one")
            receptor.apply_batch(tx, [d.signal for d in batch])

        try:
            await self.store.write(job, durable=False)
        except StoppedAt as stop:
            if stop.index == 0:
                return _Failure(batch[0], stop.error)
            failure = await self._apply_store_batch(receptor, batch[: stop.index])
            return failure or _Failure(batch[stop.index], stop.error)
        except Exception:
            for delivery in batch:  # no index to go by: one transaction each
                failure = await self._deliver_one(receptor, delivery)
                if failure is not None:
                    return failure
            return None
        duration = time.perf_counter() - started
        for delivery in batch:
            self._log_outcome(receptor, delivery, "delivered", duration, batch=len(batch))
        self._announce_progress()
        return None

    async def _deliver_one(self, receptor: Receptor, delivery: PendingDelivery) -> _Failure | None:
        attempt = delivery.attempts + 1
        started = time.perf_counter()

        def mark_done(tx: Tx) -> None:
            if not tx.signals.mark_delivered(delivery.id, attempt, self.clock()):
                raise RuntimeError(f"delivery {delivery.id} is no longer pending")

        async def commit(job: Callable[[Tx], T]) -> T:
            def with_done_mark(tx: Tx) -> T:
                mark_done(tx)  # first: if it was done already, the job must not run
                return job(tx)

            return await self.store.write(with_done_mark, durable=False)

        async def save_checkpoint(checkpoint: dict[str, Any]) -> None:
            now = self.clock()
            await self.store.write(
                lambda tx: tx.signals.save_checkpoint(delivery.id, checkpoint, now)
            )

        context = DeliveryContext(
            delivery_id=delivery.id,
            attempt=attempt,
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
            return _Failure(delivery, exc)
        self._log_outcome(receptor, delivery, "delivered", time.perf_counter() - started)
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
        await self.store.write(
            lambda tx: tx.signals.record_failure(delivery.id, attempt, error, now, retry_at),
            durable=False,
        )
        outcome = "dead" if dead else "retrying"
        self._log_outcome(receptor, delivery, outcome, None, error=error, retry_in=delay or None)
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

    def _log_outcome(
        self,
        receptor: Receptor,
        delivery: PendingDelivery,
        outcome: str,
        duration: float | None,
        **extra: Any,
    ) -> None:
        method = log.warning if outcome in ("dead", "retrying") else log.info
        method(
            "delivery",
            signal_id=delivery.signal.id,
            signal_type=delivery.signal.type,
            receptor=receptor.key,
            attempt=delivery.attempts + 1,
            outcome=outcome,
            duration_ms=None if duration is None else round(duration * 1000, 3),
            **{k: v for k, v in extra.items() if v is not None},
        )
