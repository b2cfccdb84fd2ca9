"""``/v1/marks/{id}/correct``, ``/v1/marks/{id}/retract``, ``/v1/forget`` and
``/v1/tombstones``: a person governing their memory. Each change is a signal
(``memory.mark_corrected``, ``memory.mark_retracted``, ``memory.forget``), so the log stays
the audit trail. They run through the command path (:mod:`daemon.services.commands`): the
rules are checked first so a refusal is answered at once (404/409/422)."""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Response
from pydantic import BaseModel, Field, model_validator

from daemon.api.deps import Running, not_applied
from daemon.core.clock import iso
from daemon.core.forgetting import mentions
from daemon.core.records import Mark, Tombstone
from daemon.services.governance import ForgetTarget, live_lines
from daemon.store import Tx

router = APIRouter(tags=["governance"])

Reason = Field(min_length=1, max_length=16_384)
Who = Field(min_length=1, max_length=128, description="Who asks (a person's name).")
Key = Field(None, min_length=1, max_length=256, description="A repeat with it is answered once.")


class Correction(BaseModel):
    text: str = Field(min_length=1, max_length=16_384)
    reason: str = Reason
    by: str = Who
    idempotency_key: str | None = Key


class Retraction(BaseModel):
    reason: str = Reason
    by: str = Who
    idempotency_key: str | None = Key


class ForgetRequest(BaseModel):
    subject: str | None = Field(None, min_length=1, max_length=512)
    mark_id: str | None = Field(None, min_length=1, max_length=128)
    reason: str = Reason
    by: str = Who
    idempotency_key: str | None = Key

    @model_validator(mode="after")
    def _one_target(self) -> ForgetRequest:
        if (self.subject is None) == (self.mark_id is None):
            raise ValueError("needs exactly one of subject and mark_id")
        return self


def _json(record: Mark | Tombstone) -> dict[str, Any]:
    return {k: iso(v) if isinstance(v, datetime) else v for k, v in record.to_row().items()}


@router.post("/v1/marks/{mark_id}/correct", summary="Supersede a mark with corrected text")
async def correct_mark(
    mark_id: str, body: Correction, services: Running, response: Response
) -> dict[str, Any]:
    outcome = await services.commands.correct(
        mark_id, body.text, body.reason, body.by, body.idempotency_key
    )
    if not outcome.applied:
        return not_applied(outcome, response)
    old, new = await services.bus.store.read(lambda tx: _pair(tx, mark_id))
    return {"signal_id": outcome.signal_id, "superseded": _json(old), "mark": _json(new)}


def _pair(tx: Tx, mark_id: str) -> tuple[Mark, Mark]:
    old = tx.marks.get(mark_id)
    assert old is not None and old.superseded_by is not None
    new = tx.marks.get(old.superseded_by)
    assert new is not None
    return old, new


@router.post("/v1/marks/{mark_id}/retract", summary="End a mark, keeping its history")
async def retract_mark(
    mark_id: str, body: Retraction, services: Running, response: Response
) -> dict[str, Any]:
    outcome = await services.commands.retract(mark_id, body.reason, body.by, body.idempotency_key)
    if not outcome.applied:
        return not_applied(outcome, response)
    mark = await services.bus.store.read(lambda tx: tx.marks.get(mark_id))
    assert mark is not None
    return {"signal_id": outcome.signal_id, "mark": _json(mark)}


@router.post(
    "/v1/forget",
    summary="Erase every copy of a subject's marks, or of one mark; list the live lines left",
)
async def forget_route(
    body: ForgetRequest, services: Running, response: Response
) -> dict[str, Any]:
    workspace = services.memory.workspace
    target = ForgetTarget(subject=body.subject, mark_id=body.mark_id)
    outcome = await services.commands.forget(target, body.reason, body.by, body.idempotency_key)
    if not outcome.applied:
        return not_applied(outcome, response)
    found = await services.bus.store.read(lambda tx: tx.tombstones.listing(workspace))
    [tombstone] = [t for t in found if t.signal_id == outcome.signal_id]
    daily = services.memory.daily
    live = await anyio.to_thread.run_sync(
        live_lines, daily, partial(mentions, forgotten=outcome.mentions)
    )
    return {
        "signal_id": outcome.signal_id,
        "tombstone": _json(tombstone),
        # The person's own files: theirs to edit, so only where, never what.
        "live_lines": [
            {"date": day.isoformat(), "line": number, "path": str(daily.path(day))}
            for day, number in live
        ],
    }


@router.get("/v1/tombstones", summary="What was forgotten: who, when, why, how many")
async def tombstones(services: Running) -> list[dict[str, Any]]:
    workspace = services.memory.workspace
    found = await services.bus.store.read(lambda tx: tx.tombstones.listing(workspace))
    return [_json(t) for t in found]
