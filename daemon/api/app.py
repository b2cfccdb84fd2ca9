"""The HTTP API (FastAPI): one router per resource (signals, recall, context, seeds,
governance, health), and the error handlers that give every failure the right status and
name the field: 422 bad input, 413 too large, 404 unknown, 409 conflict, 503 when the store
cannot take a write (nothing was stored). The one place a domain refusal
(:mod:`daemon.services.errors`) becomes an HTTP status. Loom's pages are mounted beside it
by the composition (:mod:`daemon.composition`)."""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from daemon import __version__
from daemon.api import context, governance, health, marks, recall, seeds, signals
from daemon.api.deps import Problem
from daemon.bus import BusClosed
from daemon.core.errors import describe, field_errors
from daemon.core.signal import SignalRejected, SignalTooLarge
from daemon.services.errors import Conflict, Invalid, NotFound, Refused
from daemon.services.running import Services
from daemon.store import StoreLost, WriterClosed

log = structlog.get_logger("cambium.api")

REFUSAL_STATUS: dict[type[Refused], int] = {NotFound: 404, Conflict: 409, Invalid: 422}


def create_app(services: Services) -> FastAPI:
    app = FastAPI(
        title="Cambium Memory",
        version=__version__,
        description="Emit signals, recall memory, review seeds, correct and forget.",
        # FastAPI's /docs and /redoc pages load their scripts from a CDN; a local daemon makes
        # no outside requests. The schema itself stays at /openapi.json.
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = services
    for module in (signals, recall, context, seeds, governance, marks, health):
        app.include_router(module.router)

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        body: dict[str, Any] = {"detail": exc.detail}
        if exc.errors:
            body["errors"] = [e.model_dump() for e in exc.errors]
        return JSONResponse(body, status_code=exc.status)

    @app.exception_handler(Refused)
    async def _refused(request: Request, exc: Refused) -> JSONResponse:
        status = next(s for kind, s in REFUSAL_STATUS.items() if isinstance(exc, kind))
        return await _problem(request, Problem(status, str(exc)))

    @app.exception_handler(SignalRejected)
    async def _rejected(request: Request, exc: SignalRejected) -> JSONResponse:
        status = 413 if isinstance(exc, SignalTooLarge) else 422
        return await _problem(request, Problem(status, str(exc), exc.errors))

    @app.exception_handler(ValidationError)
    async def _invalid(request: Request, exc: ValidationError) -> JSONResponse:
        errors = field_errors(exc.errors())
        return await _problem(request, Problem(422, describe(errors), errors))

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own checks (query parameters, JSON bodies) in the same shape as ours:
        # the field named without its "query."/"body." prefix.
        errors = field_errors(exc.errors(), skip_location=1)
        return await _problem(request, Problem(422, describe(errors), errors))

    @app.exception_handler(BusClosed)
    async def _closing(request: Request, exc: BusClosed) -> JSONResponse:
        return await _problem(
            request, Problem(503, "the daemon is shutting down; nothing was stored")
        )

    @app.exception_handler(SQLAlchemyError)
    @app.exception_handler(WriterClosed)
    @app.exception_handler(StoreLost)
    async def _store_down(request: Request, exc: Exception) -> JSONResponse:
        log.error("store unavailable", path=request.url.path, error=str(exc))
        why = str(exc) if isinstance(exc, StoreLost) else type(exc).__name__
        return await _problem(
            request, Problem(503, f"the store cannot be written; nothing was stored ({why})")
        )

    return app
