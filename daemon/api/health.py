"""``/v1/health``: is the daemon well, and what is it doing."""

from __future__ import annotations

import time
from typing import Any

import anyio.to_thread
from fastapi import APIRouter

from daemon import __version__
from daemon.api.deps import Running
from daemon.core.clock import iso

router = APIRouter(prefix="/v1/health", tags=["health"])


def _status(services: Running) -> str:
    if services.bus.store.lost:
        return "store lost"  # the database file was deleted or replaced: writes are refused
    if services.bus.store.write_failure is not None:
        return "degraded"  # writes fail (a full disk, say): each is refused, none is lost
    return "ok" if services.bus.accepting else "stopping"


@router.get("", summary="Is the daemon well, and what is it doing")
async def health(services: Running) -> dict[str, Any]:
    bus = services.bus
    counts = await bus.store.read(lambda tx: tx.signals.open_counts())
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
        **embedding,
    }
