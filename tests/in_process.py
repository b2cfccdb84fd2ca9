"""The HTTP API in process: the real app, bus and store behind httpx's ASGITransport (no
socket, no subprocess), as the Unix socket or loopback TCP serves it, and the signals the
tests post to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from support import FAST_RETRY, T0

from daemon.bus import SignalBus
from daemon.composition import build_app, build_receptors
from daemon.config import parse_config
from daemon.services.recall import Memory
from daemon.services.running import Services
from daemon.store import Store

TOKEN = "s3cret-token-of-enough-length"
BODY_LIMIT = 1024 * 1024
OBSERVATION = {
    "type": "memory.observation",
    "source_id": "agent",
    "payload": {
        "subject": "user.food",
        "observation": "likes figs",
        "evidence": {"note": "said so"},
    },
}
PLANT = {
    "type": "memory.seed_planted",
    "source_id": "agent",
    "payload": {"subject": "user.food", "proposed_change": "x", "target_file": "a.md"},
}


@asynccontextmanager
async def serving(
    store: Store, root: Path, token: str | None = None, receptors: set[str] | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """The API as the Unix socket serves it (body limit), or as loopback TCP does (behind
    the bearer token too), with a running bus for the workspace ``home`` (with only the
    ``receptors`` named, if given)."""
    config = parse_config(
        {"workspace": "home", "paths": {"daily": str(root / "daily"), "compost": str(root / "c")}}
    )
    memory = Memory.from_config(config, store)
    running = [
        r
        for r in build_receptors(config, store, memory.daily)
        if receptors is None or r.key in receptors
    ]
    async with SignalBus(store, running, workspace="home", retry=FAST_RETRY) as bus:
        services = Services(bus=bus, memory=memory, clock=lambda: T0)
        app = build_app(services, BODY_LIMIT)
        if token:
            app = app.with_token(token)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://cambium") as client:
            yield client
