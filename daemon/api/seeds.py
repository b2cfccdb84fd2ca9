"""``/v1/seeds``: list seeds, review one (through a ``memory.seed_reviewed`` signal, so the
log stays the audit trail)."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from daemon.api.deps import (
    Problem,
    Running,
    Services,
    applied,
    apply_signal,
    sent_before,
    settle,
)
from daemon.core import signal_types
from daemon.core.clock import iso
from daemon.core.records import Seed
from daemon.schema.waits import DELIVERY_WAIT_SECONDS
from daemon.services.review import ReviewRefused, reviewable, undoable
from daemon.store import Store

router = APIRouter(prefix="/v1/seeds", tags=["seeds"])


class Undo(BaseModel):
    reviewer: str = Field(min_length=1, max_length=128)
    idempotency_key: str | None = Field(None, min_length=1, max_length=256)


class Review(BaseModel):
    decision: Literal["accepted", "rejected"]
    reviewer: str = Field(min_length=1, max_length=128)
    # A retry with the same key answers with the review already made instead of 409.
    idempotency_key: str | None = Field(None, min_length=1, max_length=256)


def review_signal_id(idempotency_key: str) -> str:
    """32 hex digits, like a generated id, derived from the key: a repeat is known by id."""
    return hashlib.sha256(f"review:{idempotency_key}".encode()).hexdigest()[:32]


def seed_json(seed: Seed) -> dict[str, Any]:
    return {k: iso(v) if isinstance(v, datetime) else v for k, v in seed.to_row().items()}


@router.get("", summary="Seeds, newest first")
async def list_seeds(
    services: Running, state: Literal["pending", "accepted", "rejected", "withered"] | None = None
) -> list[dict[str, Any]]:
    workspace = services.layers.workspace
    found = await services.bus.store.read(lambda tx: tx.seeds.listing(workspace, state))
    return [seed_json(s) for s in found]


@router.post("/{seed_id}/review", summary="Accept or reject a pending seed")
async def review_seed(seed_id: str, review: Review, services: Running) -> JSONResponse:
    async with services.reviewing:
        return await _review(seed_id, review, services)


async def _review(seed_id: str, review: Review, services: Services) -> JSONResponse:
    store, workspace = services.bus.store, services.layers.workspace
    now, wither_days = services.clock(), services.seed_rules.wither_days
    key = review.idempotency_key
    signal_id = review_signal_id(key) if key else None
    try:
        await store.read(lambda tx: reviewable(tx, workspace, seed_id, now, wither_days))
    except ReviewRefused as exc:
        if exc.status == 409 and signal_id and await _stored(store, signal_id):
            seed = await store.read(lambda tx: tx.seeds.get(seed_id, workspace))
            assert seed is not None
            return JSONResponse(seed_json(seed) | {"signal_id": signal_id})
        raise Problem(exc.status, str(exc)) from None
    stored = await services.bus.emit_raw(
        {
            "type": signal_types.SEED_REVIEWED,
            "source_id": "review",
            "source_layer": "human",
            "workspace_id": workspace,
            "payload": {
                "seed_id": seed_id,
                "decision": review.decision,
                "reviewer": review.reviewer,
            },
        }
        | ({"id": signal_id, "idempotency_key": key} if key else {})
    )
    status = await settle(services, stored.id, DELIVERY_WAIT_SECONDS)
    if status.get("seeds") == "dead":
        detail = await store.read(lambda tx: tx.signals.get(stored.id))
        error = detail.deliveries[0].last_error if detail and detail.deliveries else None
        raise Problem(409, error or "review refused")
    seed = await store.read(lambda tx: tx.seeds.get(seed_id, workspace))
    assert seed is not None
    code = 200 if seed.state != "pending" else 202
    return JSONResponse(seed_json(seed) | {"signal_id": stored.id}, status_code=code)


@router.post("/{seed_id}/undo", summary="Undo a seed's review (within seeds.undo_hours)")
async def undo_review(seed_id: str, body: Undo, services: Running) -> dict[str, Any]:
    store, workspace = services.bus.store, services.layers.workspace
    now, hours = services.clock(), services.seed_rules.undo_hours
    kind, key = signal_types.SEED_REVIEW_UNDONE, body.idempotency_key
    async with services.reviewing:
        signal_id = await sent_before(services, kind, key)
        if signal_id is not None:
            await applied(services, signal_id, kind, "seeds")
        else:
            try:
                await store.read(lambda tx: undoable(tx, workspace, seed_id, now, hours))
            except ReviewRefused as exc:
                raise Problem(exc.status, str(exc)) from None
            payload = {"seed_id": seed_id, "reviewer": body.reviewer}
            signal_id = await apply_signal(services, kind, payload, body.reviewer, "seeds", key)
    seed = await store.read(lambda tx: tx.seeds.get(seed_id, workspace))
    assert seed is not None
    return seed_json(seed) | {"signal_id": signal_id}


async def _stored(store: Store, signal_id: str) -> bool:
    return await store.read(lambda tx: tx.signals.get(signal_id)) is not None
