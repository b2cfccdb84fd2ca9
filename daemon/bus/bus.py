"""The signal bus: persist before deliver, as a log with a cursor per receptor.

``emit`` validates nothing itself (a :class:`Signal` is valid by construction); it appends
the signal to the store's log through the group-committing writer and returns only once that
transaction is durable. A receptor whose whole effect is a write to the store, and that has
nothing older left to deliver, applies the signal inside that same transaction and moves its
cursor with it (:mod:`daemon.bus.inline`). Every other delivery is made by the receptor's
worker (:mod:`daemon.bus.workers`), which reads the log after its cursor in order, so crash
recovery is nothing special: whatever was not settled when the process died lies after a
cursor when it starts.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Sequence
from contextlib import AsyncExitStack, suppress
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import structlog

from daemon.bus.inline import Appended, InlinePath
from daemon.bus.leases import Leases
from daemon.bus.receptor import Receptor
from daemon.bus.retry import RetryPolicy
from daemon.bus.workers import Worker, pause
from daemon.core.clock import Clock, utcnow
from daemon.core.signal import Signal
from daemon.store import NewSignal, Store, Stored, Tx

T = TypeVar("T")

log = structlog.get_logger("cambium.bus")


class BusClosed(RuntimeError):
    """The bus is not accepting signals (not started, or shutting down)."""


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
        # The types some receptor applies; the edge refuses any other unless asked not to.
        self.routed: frozenset[str] = frozenset().union(*(r.binds for r in self.receptors))
        self.workspace = workspace
        self.retry_policy = retry or RetryPolicy()
        self.clock = clock
        self.grace_period = grace_period
        self._inline = InlinePath(self.receptors, lambda: self._owned, clock)
        self._workers = {
            r.key: Worker(
                r,
                store,
                owned=lambda: self._owned,
                progress=self._announce_progress,
                retry=self.retry_policy,
                clock=clock,
                batch_size=batch_size,
                linger=linger,
            )
            for r in self.receptors
        }
        allowed = set(keys if may_own is None else may_own)
        self._leases = Leases(
            store,
            owner or f"{socket.gethostname()}:{os.getpid()}",
            # In the receptors' order, the order every transaction of the fleet locks their
            # cursor rows in (registration, inline delivery): any other order lets a start's
            # registration and a member's renewal wait for each other (a deadlock).
            [key for key in keys if key in allowed],
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
        remaining = len(self._workers)

        async def run_worker(worker: Worker) -> None:
            nonlocal remaining
            try:
                await worker.run(self._stop)
            finally:
                remaining -= 1
                if remaining == 0 and self._workers_done is not None:
                    self._workers_done.set()

        if not self._workers:
            self._workers_done.set()
        for key, worker in self._workers.items():
            task_group.start_soon(run_worker, worker, name=f"receptor:{key}")
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
        for worker in self._workers.values():
            worker.wake()
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
        if signal.workspace_id != self.workspace and "workspace_id" not in signal.model_fields_set:
            signal = signal.model_copy(update={"workspace_id": self.workspace})
        appended: Appended = await self.store.write_batched(
            self._inline.append, NewSignal(signal, self.clock())
        )
        for key in appended.waiting:
            self._workers[key].wake()
        return appended.stored

    async def emit_raw(self, data: Any) -> Stored:
        """Validate untrusted input (a dict or JSON text) against the bus clock, then emit.
        Raises :class:`~daemon.core.signal.SignalRejected` and stores nothing if invalid."""
        return await self.emit(Signal.parse(data, now=self.clock(), workspace=self.workspace))

    async def retry(self, signal_id: str, receptor: str | None = None) -> list[str]:
        """Deliver a signal's dead deliveries again; returns the receptors revived."""
        now = self.clock()
        revived = await self.store.write(
            lambda tx: tx.signals.revive_dead(signal_id, now, receptor)
        )
        for key in revived:
            if key in self._workers:
                self._workers[key].wake()
        return revived

    async def settled(self, signal_id: str) -> dict[str, str]:
        """Wait until no delivery of ``signal_id`` is pending; return each receptor's status.
        (Bound the wait with ``anyio.move_on_after``.)"""

        def status(tx: Tx) -> dict[str, str] | None:
            found = tx.signals.status(signal_id)
            return None if "pending" in found.values() else found

        return await self.wait_until(status)

    async def wait_until(self, check: Callable[[Tx], T | None]) -> T:
        """Read ``check`` again after each settled delivery until it returns something
        other than ``None``; return that. (Bound the wait with ``anyio.move_on_after``.)"""
        while True:
            progress = self._progress
            found = await self.store.read(check)
            if found is not None:
                return found
            # Another daemon of a fleet may make the progress: look again now and then.
            with anyio.move_on_after(0.5):
                await progress.wait()

    def _announce_progress(self) -> None:
        progress, self._progress = self._progress, anyio.Event()
        progress.set()

    # -- ownership ------------------------------------------------------------------------

    async def _keep_leases(self) -> None:
        while not self._stop.is_set():
            await pause(self._stop, self._leases.seconds / 3)
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
            self._workers[key].wake()
