"""The workers: one per receptor, delivering what lies after its cursor, in log order.

A worker sleeps until the bus wakes it (an emit left it something, a dead delivery was
revived, a lease was won), reads the next deliveries after its receptor's cursor and
delivers them: a store receptor's batch in one transaction with the cursor's move, any other
delivery one at a time. A failure holds back what follows it (per-receptor order) until the
retry policy's decision is carried out: another attempt later, or the delivery is dead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import structlog

from daemon.bus.inline import CursorMoved
from daemon.bus.receptor import DeliveryContext, Receptor, StoppedAt, StoreReceptor
from daemon.bus.retry import RetryPolicy
from daemon.core.clock import Clock
from daemon.store import Delivery, Store, Tx

T = TypeVar("T")

# A cursor this far behind the head with nothing of its receptor's to deliver in between is
# moved to the head (one write), so the stretch is not read again at the next wake-up.
SKIP_AHEAD = 256

log = structlog.get_logger("cambium.bus")


@dataclass
class _Failure:
    delivery: Delivery
    position: int  # the receptor's cursor when it failed
    error: BaseException


async def pause(stop: anyio.Event, seconds: float) -> None:
    """Wait ``seconds``, or less if ``stop`` is set meanwhile."""
    with anyio.move_on_after(seconds):
        await stop.wait()


class Worker:
    """Delivers one receptor's signals while this daemon owns it."""

    def __init__(
        self,
        receptor: Receptor,
        store: Store,
        *,
        owned: Callable[[], frozenset[str]],
        progress: Callable[[], None],
        retry: RetryPolicy,
        clock: Clock,
        batch_size: int,
        linger: float,
    ) -> None:
        self.receptor = receptor
        self.store = store
        self._owned = owned
        self._progress = progress  # a delivery was settled (delivered or dead)
        self._retry = retry
        self._clock = clock
        self._batch_size = batch_size
        self._linger = linger
        self._wake = anyio.Event()
        self._stop = anyio.Event()

    def wake(self) -> None:
        """Look at the log again (now, or as soon as the current delivery is over)."""
        self._wake.set()

    async def run(self, stop: anyio.Event) -> None:
        """Deliver until ``stop`` is set."""
        self._stop = stop
        key = self.receptor.key
        while not stop.is_set():
            wake = self._wake = anyio.Event()
            if key not in self._owned():
                await wake.wait()
                continue
            try:
                position, batch, head = await self.store.read(self._next)
                if not batch:
                    if head - position >= SKIP_AHEAD:
                        await self._skip_to(position, head)
                    await wake.wait()
                    # Let signals arriving together be delivered together: one transaction
                    # for many instead of one each, at the cost of this much latency.
                    await anyio.sleep(self._linger)
                    continue
                failure = await self._deliver_batch(position, batch)
                if failure is not None:
                    await self._after_failure(failure)
            except Exception as exc:  # the store itself failed: wait, then try again
                log.error("delivery loop error", receptor=key, error=repr(exc))
                await pause(stop, self._retry.store_pause)

    def _next(self, tx: Tx) -> tuple[int, list[Delivery], int]:
        """The cursor, what lies after it to deliver, and (when nothing does) the log's head:
        none of this receptor's signals lies between the two."""
        position, batch = tx.signals.next_deliveries(self.receptor.key, self._batch_size)
        return position, batch, position if batch else tx.signals.head()

    async def _skip_to(self, position: int, head: int) -> None:
        """Move the cursor over a stretch of the log without any of this receptor's signals
        (the log is read in ``seq`` order, not by type: this stretch is never read again).
        Commit order is ``seq`` order, so nothing can still appear below the head."""
        now = self._clock()
        await self.store.write(
            lambda tx: tx.signals.advance(self.receptor.key, position, head, now), durable=False
        )

    async def _deliver_batch(self, position: int, batch: list[Delivery]) -> _Failure | None:
        receptor = self.receptor
        if isinstance(receptor, StoreReceptor) and len(batch) > 1 and not batch[0].revived:
            return await self._apply_store_batch(receptor, position, batch)
        for delivery in batch:
            if self._stop.is_set():
                return None
            failure = await self._deliver_one(position, delivery)
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
        now = self._clock()

        def job(tx: Tx) -> None:
            if not tx.signals.settle(receptor.key, batch, position, now):
                raise CursorMoved(receptor.key)
            receptor.apply_batch(tx, [d.signal for d in batch])

        try:
            await self.store.write(job, durable=False)
        except StoppedAt as stop:
            if stop.index == 0:
                return _Failure(batch[0], position, stop.error)
            failure = await self._apply_store_batch(receptor, position, batch[: stop.index])
            return failure or _Failure(batch[stop.index], batch[stop.index - 1].seq, stop.error)
        except CursorMoved:
            return None  # settled elsewhere: read the log again
        except Exception:
            return await self._deliver_each(position, batch)
        self._delivered(batch, time.perf_counter() - started)
        return None

    async def _deliver_each(self, position: int, batch: list[Delivery]) -> _Failure | None:
        """No index to go by: one transaction each."""
        for delivery in batch:
            failure = await self._deliver_one(position, delivery)
            if failure is not None:
                return failure
            position = delivery.seq
        return None

    async def _deliver_one(self, position: int, delivery: Delivery) -> _Failure | None:
        started = time.perf_counter()
        key = self.receptor.key

        def mark_done(tx: Tx) -> None:
            if not tx.signals.settle(key, [delivery], position, self._clock()):
                raise RuntimeError(
                    f"delivery of {delivery.signal.id} to {key} is no longer pending"
                )

        async def commit(job: Callable[[Tx], T]) -> T:
            def with_done_mark(tx: Tx) -> T:
                mark_done(tx)  # first: if it was done already, the job must not run
                return job(tx)

            return await self.store.write(with_done_mark, durable=False)

        async def save_checkpoint(checkpoint: dict[str, Any]) -> None:
            now = self._clock()
            await self.store.write(lambda tx: tx.signals.save_checkpoint(delivery, checkpoint, now))

        context = DeliveryContext(
            seq=delivery.seq,
            attempt=delivery.attempts + 1,
            checkpoint=delivery.checkpoint,
            now=self._clock,
            commit=commit,
            save_checkpoint=save_checkpoint,
        )
        try:
            await self.receptor.deliver(delivery.signal, context)
            if not context.committed:
                await self.store.write(mark_done, durable=False)
        except Exception as exc:
            return _Failure(delivery, position, exc)
        self._delivered([delivery], time.perf_counter() - started)
        return None

    async def _after_failure(self, failure: _Failure) -> None:
        delivery = failure.delivery
        attempt = delivery.attempts + 1
        error = str(failure.error) or repr(failure.error)
        now = self._clock()
        decision = self._retry.decide(failure.error, attempt, now)
        retry_at = None if decision is None else decision.retry_at
        recorded = await self.store.write(
            lambda tx: tx.signals.record_failure(delivery, failure.position, error, now, retry_at),
            durable=False,
        )
        if not recorded:
            log.info("settled elsewhere", signal_id=delivery.signal.id, receptor=self.receptor.key)
            self._progress()
            return
        log.warning(
            "delivery failed",
            signal_id=delivery.signal.id,
            signal_type=delivery.signal.type,
            receptor=self.receptor.key,
            attempt=attempt,
            outcome="dead" if decision is None else "retrying",
            error=error,
            retry_in=None if decision is None else decision.delay or None,
        )
        if decision is None:
            self._progress()
        else:
            await pause(self._stop, decision.delay)

    def _delivered(self, batch: list[Delivery], duration: float) -> None:
        log.info(
            "delivered",
            receptor=self.receptor.key,
            count=len(batch),
            first_signal_id=batch[0].signal.id,
            last_seq=batch[-1].seq,
            duration_ms=round(duration * 1000, 3),
        )
        self._progress()
