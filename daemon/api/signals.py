"""``/v1/signals``: emit, show, retry, and discard dead deliveries (through the command
path, :mod:`daemon.services.commands`, so a discard is a signal in the audit trail)."""

from __future__ import annotations

import json
import math
from typing import Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, model_validator

from daemon.api.deps import Problem, Running
from daemon.core.errors import FieldError
from daemon.core.records import Mark
from daemon.core.signal import Signal, SignalRejected
from daemon.schema.admission import admitted
from daemon.schema.payloads import Observation, SeedPlanted
from daemon.schema.waits import MAX_WAIT_SECONDS
from daemon.services.commands import delivery_status
from daemon.services.review import PlantingRefused, check_planting
from daemon.services.running import Services

router = APIRouter(prefix="/v1/signals", tags=["signals"])


def _emission_schema() -> dict[str, Any]:
    """A signal's fields, and beside them the emitter's ``allow_unrouted``."""
    schema = Signal.model_json_schema(by_alias=True)
    schema["properties"]["allow_unrouted"] = {
        "type": "boolean",
        "default": False,
        "description": "Store it even though no receptor binds its type (else 422)",
    }
    return schema


Wait = Query(0.0, ge=0.0, le=MAX_WAIT_SECONDS, description="Seconds to wait for delivery")


@router.post(
    "",
    status_code=201,
    summary="Emit a signal; answered once it is durable",
    openapi_extra={
        "parameters": [
            {
                "name": "wait",
                "in": "query",
                "required": False,
                "description": "Seconds to wait for delivery",
                "schema": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
            }
        ],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _emission_schema()}},
        },
    },
    responses={200: {"description": "Already stored (duplicate)"}, 413: {}, 422: {}, 503: {}},
)
async def emit(request: Request) -> JSONResponse:
    # The daemon's own door (daemon.api.ingress) answers this before the router; the route
    # stays for the schema and for an app served without that door.
    wait = request.query_params.get("wait")
    status, body = await emit_signal(request.app.state.services, await request.body(), wait)
    return JSONResponse(body, status_code=status)


async def emit_signal(
    services: Services, body: bytes, wait: str | None
) -> tuple[int, dict[str, Any]]:
    """Emit the signal in ``body`` (``wait``: the query's parameter, as given); the status
    and the answer. Raises what :mod:`daemon.api.problems` answers.

    Every emit takes this path: it reads its one parameter itself instead of through
    FastAPI's dependency and validation machinery (which costs more than the rest of the
    request), and the signal is parsed once, here, then checked against the contract of the
    receptor that will apply it (what would only die is not stored)."""
    bus = services.bus
    seconds = _wait(wait)
    data, allow_unrouted = _emission(body)
    signal = Signal.parse(data, now=bus.clock(), workspace=bus.workspace)
    payload = admitted(signal, routed=bus.routed, allow_unrouted=allow_unrouted)
    if isinstance(payload, SeedPlanted):
        await _plantable(services, signal, payload)
    stored = await bus.emit(signal)
    answer: dict[str, Any] = {"id": stored.id, "duplicate": stored.duplicate}
    if seconds:
        answer["deliveries"] = await delivery_status(bus, stored.id, seconds)
        if isinstance(payload, Observation) and answer["deliveries"].get("observation") == (
            "delivered"
        ):
            answer["mark"] = await _observed(services, stored.id)
    return 200 if stored.duplicate else 201, answer


async def _observed(services: Services, signal_id: str) -> dict[str, str] | None:
    """The mark a delivered observation made or reinforced, read back from the store."""
    mark = await services.bus.store.read(lambda tx: tx.marks.made_by(signal_id))
    if mark is None:  # forgotten since
        return None
    made = mark.id in Mark.ids_for_signal(signal_id)
    return {"id": mark.id, "outcome": "made" if made else "reinforced"}


def _emission(body: bytes) -> tuple[bytes | dict[str, Any], bool]:
    """The signal, and whether its emitter asked to store it though no receptor binds its
    type (``allow_unrouted``, beside the signal's fields). Only a body that names it is
    decoded here; every other is handed to the signal's own parser as it came."""
    if b'"allow_unrouted"' not in body:
        return body, False
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return body, False  # the signal's parser says what is wrong with it
    if not isinstance(data, dict):
        return body, False
    allow = data.pop("allow_unrouted", False)
    if not isinstance(allow, bool):
        error = FieldError("allow_unrouted", "must be true or false")
        raise Problem(422, f"{error.field}: {error.message}", [error])
    return data, allow


async def _plantable(services: Services, signal: Signal, seed: SeedPlanted) -> None:
    """Refuse a seed the gates refuse, or one based on marks that do not stand."""
    workspace = (
        signal.workspace_id if "workspace_id" in signal.model_fields_set else services.bus.workspace
    )
    try:
        await services.bus.store.read(
            lambda tx: check_planting(tx, workspace, seed.proposed_change, seed.based_on_marks)
        )
    except PlantingRefused as exc:
        raise SignalRejected([FieldError(f"payload.{exc.field}", str(exc))]) from None


def _wait(given: str | None) -> float:
    if given is None:
        return 0.0
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= MAX_WAIT_SECONDS:  # NaN fails too
        error = FieldError("wait", f"must be a number of seconds from 0 to {MAX_WAIT_SECONDS:g}")
        raise Problem(422, f"{error.field}: {error.message}", [error])
    return seconds


class DiscardRequest(BaseModel):
    """One signal's dead deliveries (to ``receptor``, or to every one), or with ``all``
    every dead delivery of ``receptor``."""

    signal_id: str | None = Field(None, min_length=1, max_length=128)
    receptor: str | None = Field(None, min_length=1, max_length=128)
    all: bool = False
    by: str = Field(min_length=1, max_length=128, description="Who asks (a person's name).")
    idempotency_key: str | None = Field(None, min_length=1, max_length=256)

    @model_validator(mode="after")
    def _one_target(self) -> DiscardRequest:
        if (self.signal_id is None) == (not self.all):
            raise ValueError("needs a signal_id, or a receptor with all: true")
        if self.all and self.receptor is None:
            raise ValueError("all: true needs the receptor whose dead deliveries to discard")
        return self


@router.post("/discard", summary="Give up on dead deliveries for good (audited, as a signal)")
async def discard(body: DiscardRequest, services: Running, response: Response) -> dict[str, Any]:
    outcome = await services.commands.discard(
        body.signal_id, body.receptor, body.by, body.idempotency_key
    )
    if not outcome.applied:
        response.status_code = 202
    return {"signal_id": outcome.signal_id, "applied": outcome.applied}


@router.get("/{signal_id}", summary="A signal and its deliveries")
async def show(signal_id: str, services: Running) -> dict[str, Any]:
    found = await services.bus.store.read(lambda tx: tx.signals.get(signal_id))
    if found is None:
        raise Problem(404, f"no signal {signal_id}")
    return found.to_json()


@router.post("/{signal_id}/retry", summary="Deliver a signal's dead deliveries again")
async def retry(signal_id: str, services: Running, wait: float = Wait) -> dict[str, Any]:
    if await services.bus.store.read(lambda tx: tx.signals.get(signal_id)) is None:
        raise Problem(404, f"no signal {signal_id}")
    revived = await services.bus.retry(signal_id)
    if not revived:
        raise Problem(409, f"signal {signal_id} has no dead delivery to retry")
    body: dict[str, Any] = {"id": signal_id, "revived": revived}
    if wait:
        body["deliveries"] = await delivery_status(services.bus, signal_id, wait)
    return body
