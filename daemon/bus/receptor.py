"""What the bus delivers to.

A :class:`Receptor` has a stable ``key`` (it names the receptor's cursor in the store) and
the signal types it ``binds``. The bus calls :meth:`Receptor.deliver` at least once per
stored signal of those types, in log order, so every receptor must be idempotent.

A :class:`StoreReceptor` is a receptor whose whole effect is a write to the store. It
implements :meth:`StoreReceptor.apply` (and may override :meth:`StoreReceptor.apply_batch`
to write many signals in few statements); the bus runs it inside the very transaction that
moves the receptor's cursor past them (often the emit's own), which makes it effectively-once
without further bookkeeping.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from daemon.core.signal import Signal
from daemon.store import Tx

T = TypeVar("T")


class Undeliverable(Exception):
    """Retrying cannot help: the delivery is marked dead at once with this message, and the
    receptor must not have written anything."""


class PayloadError(Undeliverable, ValueError):
    """The payload breaks the receptor's contract (so retrying cannot help)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"payload.{field}: {message}")


class StoppedAt(Exception):
    """Signal number ``index`` of a batch failed with ``error``; the ones before it did not."""

    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(index, error)
        self.index = index
        self.error = error


class DeliveryContext:
    """One attempt at one delivery, as the receptor sees it."""

    def __init__(
        self,
        *,
        seq: int,
        attempt: int,
        checkpoint: dict[str, Any] | None,
        now: Callable[[], datetime],
        commit: Callable[[Callable[[Tx], Any]], Awaitable[Any]],
        save_checkpoint: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        self.seq = seq  # the signal's place in the log
        self.attempt = attempt
        self.checkpoint = checkpoint
        self.now = now
        self._commit = commit
        self._save_checkpoint = save_checkpoint
        self.committed = False

    async def commit(self, job: Callable[[Tx], T]) -> T:
        """Run ``job`` and mark this delivery done, in one transaction. At most once."""
        if self.committed:
            raise RuntimeError("a delivery is committed once")
        result: T = await self._commit(job)
        self.committed = True
        return result

    async def save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Durably remember progress; a redelivery of this signal sees it as ``checkpoint``.

        For receptors with effects outside the store (files), so a retry can tell what the
        interrupted attempt already did."""
        await self._save_checkpoint(checkpoint)
        self.checkpoint = checkpoint


class Receptor(ABC):
    key: ClassVar[str]
    binds: ClassVar[frozenset[str]]

    @abstractmethod
    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        """Handle one signal. Raise :class:`PayloadError` for a bad payload, anything else
        for a failure worth retrying. Returning without ``delivery.commit`` lets the bus
        mark the delivery done afterwards."""


class StoreReceptor(Receptor):
    @abstractmethod
    def apply(self, tx: Tx, signal: Signal) -> None:
        """Write the signal's effect. Runs in the writer's transaction: touch only ``tx``;
        raise to undo everything this call wrote."""

    def apply_batch(self, tx: Tx, signals: Sequence[Signal]) -> None:
        """Write the effect of ``signals``, in order, as if ``apply`` ran for each. Raise
        :class:`StoppedAt` to say which one failed: the bus undoes the whole call, applies the
        ones before it again, and retries the failed one on its own."""
        for index, signal in enumerate(signals):
            try:
                self.apply(tx, signal)
            except Exception as exc:
                raise StoppedAt(index, exc) from exc

    async def deliver(self, signal: Signal, delivery: DeliveryContext) -> None:
        await delivery.commit(lambda tx: self.apply(tx, signal))
