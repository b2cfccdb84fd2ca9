"""What the routes need from the running daemon, handed to them as FastAPI dependencies,
and the errors they raise."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

import anyio
from fastapi import Depends, Request

from daemon.bus import SignalBus
from daemon.config import SeedsConfig
from daemon.core.clock import Clock
from daemon.core.errors import FieldError
from daemon.schema.waits import DELIVERY_WAIT_SECONDS
from daemon.services.recall import Layers


@dataclass
class Services:
    """The running daemon as the API sees it."""

    bus: SignalBus
    layers: Layers
    clock: Clock
    next_fires: Callable[[], dict[str, datetime | None]] = dict
    started: float = field(default_factory=time.monotonic)
    # One review at a time: two people reviewing the same seed at once get 200 and 409, not
    # a dead delivery that looks like work left to do.
    reviewing: anyio.Lock = field(default_factory=anyio.Lock)
    # Likewise one correction, retraction or forget at a time.
    governing: anyio.Lock = field(default_factory=anyio.Lock)
    seed_rules: SeedsConfig = field(default_factory=SeedsConfig)


class Problem(Exception):
    """An answer other than success: ``status``, a readable ``detail``, field errors."""

    def __init__(self, status: int, detail: str, errors: list[FieldError] | None = None) -> None:
        self.status = status
        self.detail = detail
        self.errors = errors or []


def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


Running = Annotated[Services, Depends(_services)]


async def settle(services: Services, signal_id: str, wait: float) -> dict[str, str]:
    """Each receptor's delivery status for the signal, after waiting up to ``wait`` seconds
    for none to be pending."""
    with anyio.move_on_after(wait):
        return await services.bus.settled(signal_id)
    return await services.bus.store.read(lambda tx: tx.signals.status(signal_id))


def keyed_signal_id(signal_type: str, idempotency_key: str) -> str:
    """32 hex digits derived from the key: a repeated request is known by its signal id."""
    return hashlib.sha256(f"{signal_type}:{idempotency_key}".encode()).hexdigest()[:32]


async def sent_before(services: Services, signal_type: str, key: str | None) -> str | None:
    """The id of the signal an earlier request with this idempotency key stored, if any:
    then that request's outcome is the answer (the rules are not checked again)."""
    if key is None:
        return None
    signal_id = keyed_signal_id(signal_type, key)
    found = await services.bus.store.read(lambda tx: tx.signals.get(signal_id))
    return None if found is None else signal_id


async def apply_signal(
    services: Services,
    signal_type: str,
    payload: dict[str, Any],
    by: str,
    receptor: str,
    idempotency_key: str | None = None,
) -> str:
    """Emit a signal a person asked for and wait (up to ``DELIVERY_WAIT_SECONDS``) for
    ``receptor`` to apply it; its id. A refused delivery is a 409 with the receptor's error;
    one still pending is a 202."""
    keyed = (
        {"id": keyed_signal_id(signal_type, idempotency_key), "idempotency_key": idempotency_key}
        if idempotency_key
        else {}
    )
    stored = await services.bus.emit_raw(
        {
            "type": signal_type,
            "source_id": by,
            "source_layer": "human",
            "workspace_id": services.layers.workspace,
            "payload": payload,
        }
        | keyed
    )
    return await applied(services, stored.id, signal_type, receptor)


async def applied(services: Services, signal_id: str, signal_type: str, receptor: str) -> str:
    """``signal_id`` once ``receptor`` applied it; 409 if it refused, 202 if still pending."""
    status = await settle(services, signal_id, DELIVERY_WAIT_SECONDS)
    if status.get(receptor) == "dead":
        detail = await services.bus.store.read(lambda tx: tx.signals.get(signal_id))
        error = detail.deliveries[0].last_error if detail and detail.deliveries else None
        raise Problem(409, error or f"{signal_type} refused")
    if status.get(receptor) != "delivered":
        raise Problem(202, f"stored as signal {signal_id}; not applied yet")
    return signal_id
