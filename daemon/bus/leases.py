"""Who applies which receptor's signals.

On SQLite one daemon holds the store (a file lock taken at start), so it owns every receptor
its config allows. On PostgreSQL a fleet of daemons shares the store: each receptor is owned
through a lease on its cursor row, renewed by its owner every third of the lease and taken
over by another daemon that may own it once the lease has run out. Owner changes are also
fenced where it matters: a worker's work counts only if the cursor is still where the worker
read it (:meth:`~daemon.store.SignalLog.advance`), so an owner that lost its lease
mid-delivery never applies a store effect twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from daemon.core.clock import Clock
from daemon.store import Store


class Leases:
    def __init__(
        self, store: Store, owner: str, may_own: Iterable[str], seconds: float, clock: Clock
    ) -> None:
        self.store = store
        self.owner = owner
        self.may_own = list(may_own)  # the order its cursor rows are locked in
        self.seconds = seconds
        self.clock = clock

    @property
    def shared(self) -> bool:
        """Whether other daemons may share the store (PostgreSQL)."""
        return self.store.dialect == "postgresql"

    async def renew(self) -> frozenset[str]:
        """Take or renew what this daemon may own; the receptors it owns now."""
        if not self.shared:
            return frozenset(self.may_own)
        now = self.clock()
        until = now + timedelta(seconds=self.seconds)
        return await self.store.write(
            lambda tx: frozenset(
                key for key in self.may_own if tx.signals.take_lease(key, self.owner, now, until)
            ),
            durable=False,  # a lease lost in a crash is the crash's point
        )

    async def release(self) -> None:
        if self.shared:
            await self.store.write(lambda tx: tx.signals.release_leases(self.owner))
