"""``/v1/marks/{id}/correct``, ``/v1/marks/{id}/retract``, ``/v1/forget`` and
``/v1/tombstones``: a person governing their memory. Each change is a signal
(``memory.mark_corrected``, ``memory.mark_retracted``, ``memory.forget``), so the log stays
the audit trail; the rules are checked first so a refusal is answered at once (404/409)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field, model_validator

from daemon.api.deps import Problem, Running, applied, apply_signal, sent_before
from daemon.core import signal_types
from daemon.core.clock import iso
from daemon.core.records import Mark, Tombstone
from daemon.services.governance import ForgetTarget, GovernanceRefused, standing, to_forget
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


async def _check(services: Running, rule: Any) -> Any:
    try:
        return await services.bus.store.read(rule)
    except GovernanceRefused as exc:
        raise Problem(exc.status, str(exc)) from None


async def _apply(
    services: Running,
    signal_type: str,
    payload: dict[str, Any],
    body: Correction | Retraction | ForgetRequest,
    rule: Any,
) -> str:
    """Check the rule, emit, wait for the governance receptor. A request repeated with the
    same idempotency key gets the first one's outcome instead of a 409."""
    earlier = await sent_before(services, signal_type, body.idempotency_key)
    if earlier is not None:
        return await applied(services, earlier, signal_type, "governance")
    await _check(services, rule)
    return await apply_signal(
        services, signal_type, payload, body.by, "governance", body.idempotency_key
    )


@router.post("/v1/marks/{mark_id}/correct", summary="Supersede a mark with corrected text")
async def correct_mark(mark_id: str, body: Correction, services: Running) -> dict[str, Any]:
    workspace = services.layers.workspace
    async with services.governing:
        signal_id = await _apply(
            services,
            signal_types.MARK_CORRECTED,
            {"mark_id": mark_id, "text": body.text, "reason": body.reason},
            body,
            lambda tx: standing(tx, workspace, mark_id),
        )
    old, new = await services.bus.store.read(lambda tx: _pair(tx, mark_id))
    return {"signal_id": signal_id, "superseded": _json(old), "mark": _json(new)}


def _pair(tx: Tx, mark_id: str) -> tuple[Mark, Mark]:
    old = tx.marks.get(mark_id)
    assert old is not None and old.superseded_by is not None
    new = tx.marks.get(old.superseded_by)
    assert new is not None
    return old, new


@router.post("/v1/marks/{mark_id}/retract", summary="End a mark, keeping its history")
async def retract_mark(mark_id: str, body: Retraction, services: Running) -> dict[str, Any]:
    workspace = services.layers.workspace
    async with services.governing:
        signal_id = await _apply(
            services,
            signal_types.MARK_RETRACTED,
            {"mark_id": mark_id, "reason": body.reason},
            body,
            lambda tx: standing(tx, workspace, mark_id),
        )
    mark = await services.bus.store.read(lambda tx: tx.marks.get(mark_id))
    assert mark is not None
    return {"signal_id": signal_id, "mark": _json(mark)}


@router.post("/v1/forget", summary="Erase the text of a subject's marks, or of one mark")
async def forget_route(body: ForgetRequest, services: Running) -> dict[str, Any]:
    workspace = services.layers.workspace
    target = ForgetTarget(subject=body.subject, mark_id=body.mark_id)
    async with services.governing:
        payload = {
            key: value
            for key, value in {"subject": body.subject, "mark_id": body.mark_id}.items()
            if value is not None
        } | {"reason": body.reason}
        signal_id = await _apply(
            services,
            signal_types.FORGET,
            payload,
            body,
            lambda tx: to_forget(tx, workspace, target),
        )
    found = await services.bus.store.read(lambda tx: tx.tombstones.listing(workspace))
    [tombstone] = [t for t in found if t.signal_id == signal_id]
    return {"signal_id": signal_id, "tombstone": _json(tombstone)}


@router.get("/v1/tombstones", summary="What was forgotten: who, when, why, how many")
async def tombstones(services: Running) -> list[dict[str, Any]]:
    workspace = services.layers.workspace
    found = await services.bus.store.read(lambda tx: tx.tombstones.listing(workspace))
    return [_json(t) for t in found]
