"""``/v1/seeds``: list seeds, review one or undo its review (through the command path,
:mod:`daemon.services.commands`, so the log stays the audit trail)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from daemon.api.deps import Running, not_applied
from daemon.core.clock import iso
from daemon.core.records import Seed
from daemon.services.commands import Decision
from daemon.services.running import Services

router = APIRouter(prefix="/v1/seeds", tags=["seeds"])


class Undo(BaseModel):
    reviewer: str = Field(min_length=1, max_length=128)
    idempotency_key: str | None = Field(None, min_length=1, max_length=256)


class Review(BaseModel):
    decision: Decision
    reviewer: str = Field(min_length=1, max_length=128)
    # A retry with the same key answers with the review already made instead of 409.
    idempotency_key: str | None = Field(None, min_length=1, max_length=256)


def seed_json(seed: Seed) -> dict[str, Any]:
    return {k: iso(v) if isinstance(v, datetime) else v for k, v in seed.to_row().items()}


@router.get("", summary="Seeds, newest first")
async def list_seeds(
    services: Running, state: Literal["pending", "accepted", "rejected", "withered"] | None = None
) -> list[dict[str, Any]]:
    workspace = services.memory.workspace
    found = await services.bus.store.read(lambda tx: tx.seeds.listing(workspace, state))
    return [seed_json(s) for s in found]


@router.post("/{seed_id}/review", summary="Accept or reject a pending seed")
async def review_seed(
    seed_id: str, review: Review, services: Running, response: Response
) -> dict[str, Any]:
    outcome = await services.commands.review(
        seed_id, review.decision, review.reviewer, key=review.idempotency_key
    )
    if not outcome.applied:
        response.status_code = 202  # the seed as it is, still pending
    return await _seed(services, seed_id) | {"signal_id": outcome.signal_id}


@router.post("/{seed_id}/undo", summary="Undo a seed's review (within seeds.undo_hours)")
async def undo_review(
    seed_id: str, body: Undo, services: Running, response: Response
) -> dict[str, Any]:
    outcome = await services.commands.undo_review(seed_id, body.reviewer, body.idempotency_key)
    if not outcome.applied:
        return not_applied(outcome, response)
    return await _seed(services, seed_id) | {"signal_id": outcome.signal_id}


async def _seed(services: Services, seed_id: str) -> dict[str, Any]:
    workspace = services.memory.workspace
    seed = await services.bus.store.read(lambda tx: tx.seeds.get(seed_id, workspace))
    assert seed is not None
    return seed_json(seed)
