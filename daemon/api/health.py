"""``/v1/health``: is the daemon well, and what is it doing.

Asked often (``cambium status``, Loom, supervisors polling), so it is cheap: the daemon's
door answers it in front of the router (:mod:`daemon.api.ingress`), the substrate's listing
is the one the watcher keeps, and the open deliveries' counts are read from the store only
when they may have changed (:class:`OpenCounts`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

import anyio.to_thread
from fastapi import APIRouter

from daemon import __version__
from daemon.api.deps import Running
from daemon.core.clock import iso
from daemon.services.running import Services
from daemon.store import DeliveryCounts, Store

router = APIRouter(prefix="/v1/health", tags=["health"])

# How stale the counts may be when another process changed them (daemons sharing one
# PostgreSQL database): this daemon's own writes are seen at once.
COUNTS_SECONDS = 1.0


class OpenCounts:
    """The pending and dead deliveries, read again when ``store``'s writer has run a
    transaction since the last read (this daemon's writes settle and add deliveries), and
    at least every ``seconds`` by ``clock`` (another daemon's writes; a transaction still
    committing while they were read)."""

    def __init__(
        self,
        store: Store,
        *,
        seconds: float = COUNTS_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.seconds = seconds
        self.clock = clock
        self.reads = 0
        self._counts: DeliveryCounts | None = None
        self._as_of = (-1, 0.0)  # the store's commits and the clock at the last read

    async def get(self) -> DeliveryCounts:
        commits, now = self.store.commits, self.clock()
        fresh = commits == self._as_of[0] and now - self._as_of[1] < self.seconds
        if self._counts is None or not fresh:
            self._counts = await self.store.read(lambda tx: tx.signals.open_counts())
            self._as_of = (commits, now)  # as of before the read: a commit during it counts
            self.reads += 1
        return self._counts


_OPEN_COUNTS: WeakKeyDictionary[Store, OpenCounts] = WeakKeyDictionary()


def open_counts(store: Store) -> OpenCounts:
    """The one :class:`OpenCounts` of ``store`` in this process."""
    found = _OPEN_COUNTS.get(store)
    if found is None:
        found = _OPEN_COUNTS[store] = OpenCounts(store)
    return found


def _status(services: Running) -> str:
    if services.bus.store.lost:
        return "store lost"  # the database file was deleted or replaced: writes are refused
    if services.bus.store.write_failure is not None:
        return "degraded"  # writes fail (a full disk, say): each is refused, none is lost
    return "ok" if services.bus.accepting else "stopping"


@router.get("", summary="Is the daemon well, and what is it doing")
async def health(services: Running) -> dict[str, Any]:
    return await report(services)


async def report(services: Services) -> dict[str, Any]:
    """What ``GET /v1/health`` answers (the daemon's door answers it without the router)."""
    bus = services.bus
    counts = await open_counts(bus.store).get()
    substrate = services.memory.substrate
    files = substrate.listed()
    if files is None:  # changed since the last listing (the watcher said so): list it again
        files = await anyio.to_thread.run_sync(substrate.files)
    semantic = services.memory.semantic
    embedding = {}
    if semantic is not None:  # the worker's counts, kept as it goes: no query here
        embedding = {"embedding": (await anyio.to_thread.run_sync(semantic.coverage)).to_json()}
    return {
        "status": _status(services),
        "problem": bus.store.write_failure,
        "version": __version__,
        "uptime_seconds": round(time.monotonic() - services.started, 3),
        "workspace": services.memory.workspace,
        "receptors": [
            {"key": r.key, "binds": sorted(r.binds), "owned": r.key in bus.owned}
            for r in bus.receptors
        ],
        "deliveries": {"pending": counts.pending, "dead": counts.dead},
        "rhythms": {name: iso(at) if at else None for name, at in services.next_fires().items()},
        "substrate": {"watched_files": [str(f) for f in files]},
        # "preparing" while the start brings the text index up to date (minutes after an
        # upgrade of years of notes): recall answers meanwhile, from what is indexed.
        "index": "ready" if services.memory.prepared.is_set() else "preparing",
        **_preparation(services.memory.preparation),
        **embedding,
    }


def _preparation(at: tuple[str, int, int] | None) -> dict[str, Any]:
    if at is None:
        return {}
    layer, done, total = at
    return {"preparation": {"layer": layer, "done": done, "total": total}}
