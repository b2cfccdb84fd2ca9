"""``/v1/signals``: emit, show, retry."""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from daemon.api.deps import Problem, Running, settle
from daemon.core.errors import FieldError
from daemon.core.signal import Signal
from daemon.schema.waits import MAX_WAIT_SECONDS
from daemon.services.running import Services

router = APIRouter(prefix="/v1/signals", tags=["signals"])

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
            "content": {"application/json": {"schema": Signal.model_json_schema(by_alias=True)}},
        },
    },
    responses={200: {"description": "Already stored (duplicate)"}, 413: {}, 422: {}, 503: {}},
)
async def emit(request: Request) -> JSONResponse:
    # Every emit takes this path: it reads its one parameter itself instead of through
    # FastAPI's dependency and validation machinery (which costs more than the rest of
    # the request), and the signal is validated once, by the bus.
    services: Services = request.app.state.services
    wait = _wait(request.query_params.get("wait"))
    stored = await services.bus.emit_raw(await request.body())
    body: dict[str, Any] = {"id": stored.id, "duplicate": stored.duplicate}
    if wait:
        body["deliveries"] = await settle(services, stored.id, wait)
    return JSONResponse(body, status_code=200 if stored.duplicate else 201)


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
        body["deliveries"] = await settle(services, signal_id, wait)
    return body
