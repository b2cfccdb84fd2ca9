"""The HTTP API (FastAPI). Every route is a thin translation to the bus, recall or the store;
errors name the field and use the right status: 422 bad input, 413 too large, 404 unknown,
409 conflict, 503 when the store cannot take a write (nothing was stored)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, Literal

import anyio
import anyio.to_thread
import structlog
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy.exc import SQLAlchemyError

from daemon import __version__
from daemon.bus import BusClosed, SignalBus
from daemon.core.clock import Clock, iso
from daemon.core.signal import FieldError, Signal, SignalRejected, field_errors
from daemon.services.recall import Memory, RecallQuery, recall
from daemon.services.summary import with_summary
from daemon.store import seeds as seed_store
from daemon.store import signal_log
from daemon.store.writer import WriterClosed

log = structlog.get_logger("cambium.api")

MAX_WAIT_SECONDS = 30.0


@dataclass
class Services:
    """What the API needs from the running daemon."""

    bus: SignalBus
    memory: Memory
    clock: Clock
    next_fires: Callable[[], dict[str, datetime | None]] = dict
    started: float = field(default_factory=time.monotonic)


class Problem(Exception):
    def __init__(self, status: int, detail: str, errors: list[FieldError] | None = None) -> None:
        self.status = status
        self.detail = detail
        self.errors = errors or []


class Review(BaseModel):
    decision: Literal["accepted", "rejected"]
    reviewer: str = Field(min_length=1, max_length=128)


def create_app(services: Services) -> FastAPI:
    app = FastAPI(
        title="Cambium Memory",
        version=__version__,
        description="Emit signals, recall memory, review seeds.",
    )
    bus, memory = services.bus, services.memory

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        body: dict[str, Any] = {"detail": exc.detail}
        if exc.errors:
            body["errors"] = [e.model_dump() for e in exc.errors]
        return JSONResponse(body, status_code=exc.status)

    @app.exception_handler(SignalRejected)
    async def _rejected(request: Request, exc: SignalRejected) -> JSONResponse:
        return await _problem(request, Problem(422, str(exc), exc.errors))

    @app.exception_handler(ValidationError)
    async def _invalid(request: Request, exc: ValidationError) -> JSONResponse:
        errors = field_errors(exc)
        return await _problem(request, Problem(422, _summary(errors), errors))

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own checks (query parameters, JSON bodies) in the same shape as ours:
        # the field named without its "query."/"body." prefix.
        errors = [
            FieldError(
                field=".".join(str(part) for part in error["loc"][1:]) or str(error["loc"][0]),
                message=error["msg"],
            )
            for error in exc.errors()
        ]
        return await _problem(request, Problem(422, _summary(errors), errors))

    @app.exception_handler(BusClosed)
    async def _closing(request: Request, exc: BusClosed) -> JSONResponse:
        return await _problem(
            request, Problem(503, "the daemon is shutting down; nothing was stored")
        )

    @app.exception_handler(SQLAlchemyError)
    @app.exception_handler(WriterClosed)
    async def _store_down(request: Request, exc: Exception) -> JSONResponse:
        log.error("store unavailable", path=request.url.path, error=str(exc))
        return await _problem(
            request,
            Problem(503, f"the store cannot be written; nothing was stored ({type(exc).__name__})"),
        )

    @app.post(
        "/v1/signals",
        status_code=201,
        summary="Emit a signal; answered once it is durable",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": Signal.model_json_schema(by_alias=True)}
                },
            }
        },
        responses={200: {"description": "Already stored (duplicate)"}, 413: {}, 422: {}, 503: {}},
    )
    async def emit(
        request: Request,
        wait: float = Query(
            0.0, ge=0.0, le=MAX_WAIT_SECONDS, description="Seconds to wait for delivery"
        ),
    ) -> JSONResponse:
        stored = await bus.emit_raw(await request.body())
        body: dict[str, Any] = {"id": stored.id, "duplicate": stored.duplicate}
        if wait:
            body["deliveries"] = await _settle(bus, stored.id, wait)
        return JSONResponse(body, status_code=200 if stored.duplicate else 201)

    @app.get("/v1/signals/{signal_id}", summary="A signal and its deliveries")
    async def show_signal(signal_id: str) -> dict[str, Any]:
        found = await memory.store.read(partial(signal_log.get_signal, signal_id=signal_id))
        if found is None:
            raise Problem(404, f"no signal {signal_id}")
        shown: dict[str, Any] = _jsonable(found)
        return shown

    @app.post("/v1/signals/{signal_id}/retry", summary="Deliver a signal's dead deliveries again")
    async def retry_signal(
        signal_id: str, wait: float = Query(0.0, ge=0.0, le=MAX_WAIT_SECONDS)
    ) -> dict[str, Any]:
        if await memory.store.read(partial(signal_log.get_signal, signal_id=signal_id)) is None:
            raise Problem(404, f"no signal {signal_id}")
        revived = await bus.retry(signal_id)
        if not revived:
            raise Problem(409, f"signal {signal_id} has no dead delivery to retry")
        body: dict[str, Any] = {"id": signal_id, "revived": revived}
        if wait:
            body["deliveries"] = await _settle(bus, signal_id, wait)
        return body

    @app.get("/v1/recall", summary="What the memory knows about something")
    async def recall_route(
        about: str,
        layers: str | None = None,
        horizon: str | None = None,
        min_strength: float | None = None,
        limit: int = 10,
        include_withered: bool = False,
        provenance: str | None = None,
        summary: bool = False,
    ) -> dict[str, Any]:
        query = RecallQuery.model_validate(
            {
                "about": about,
                "horizon": horizon,
                "min_strength": min_strength,
                "limit": limit,
                "include_withered": include_withered,
                "provenance": provenance,
                "summary": summary,
            }
            | ({"layers": layers} if layers is not None else {})
        )
        result = await anyio.to_thread.run_sync(recall, query, memory, services.clock())
        if query.summary:
            result = await with_summary(result, query.about, memory.llm)
        return result.to_json()

    @app.get("/v1/seeds", summary="Seeds, newest first")
    async def list_seeds(
        state: Literal["pending", "accepted", "rejected"] | None = None,
    ) -> list[dict[str, Any]]:
        found = await memory.store.read(
            partial(seed_store.list_seeds, workspace=memory.workspace, state=state)
        )
        return [_jsonable(s.to_row()) for s in found]

    @app.post("/v1/seeds/{seed_id}/review", summary="Accept or reject a pending seed")
    async def review_seed(seed_id: str, review: Review) -> JSONResponse:
        seed = await memory.store.read(partial(seed_store.get_seed, seed_id=seed_id))
        if seed is None or seed.workspace_id != memory.workspace:
            raise Problem(404, f"no seed {seed_id}")
        if seed.state != "pending":
            raise Problem(409, f"seed {seed_id} is already {seed.state}")
        stored = await bus.emit_raw(
            {
                "type": "memory.seed_reviewed",
                "source_id": "review",
                "source_layer": "human",
                "payload": {"seed_id": seed_id, **review.model_dump()},
            }
        )
        status = await _settle(bus, stored.id, 10.0)
        if status.get("seeds") == "dead":
            detail = await memory.store.read(partial(signal_log.get_signal, signal_id=stored.id))
            assert detail is not None
            raise Problem(409, detail["deliveries"][0]["last_error"] or "review refused")
        seed = await memory.store.read(partial(seed_store.get_seed, seed_id=seed_id))
        assert seed is not None
        code = 200 if seed.state != "pending" else 202
        return JSONResponse(_jsonable(seed.to_row()) | {"signal_id": stored.id}, status_code=code)

    @app.get("/v1/health", summary="Is the daemon well, and what is it doing")
    async def health() -> dict[str, Any]:
        counts = await memory.store.read(signal_log.open_delivery_counts)
        files = await anyio.to_thread.run_sync(memory.substrate.files)
        return {
            "status": "ok" if bus.accepting else "stopping",
            "version": __version__,
            "uptime_seconds": round(time.monotonic() - services.started, 3),
            "workspace": memory.workspace,
            "receptors": [{"key": r.key, "binds": sorted(r.binds)} for r in bus.receptors],
            "deliveries": {"pending": counts["pending"], "dead": counts["dead"]},
            "rhythms": {
                name: iso(at) if at else None for name, at in services.next_fires().items()
            },
            "substrate": {"watched_files": [str(f) for f in files]},
        }

    return app


async def _settle(bus: SignalBus, signal_id: str, wait: float) -> dict[str, str]:
    with anyio.move_on_after(wait):
        return await bus.settled(signal_id)
    return await bus.store.read(partial(signal_log.signal_status, signal_id=signal_id))


def _summary(errors: list[FieldError]) -> str:
    return "; ".join(f"{e.field}: {e.message}" for e in errors)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
