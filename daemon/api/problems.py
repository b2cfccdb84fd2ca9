"""Every failure the API answers, as the :class:`~daemon.api.deps.Problem` it becomes: 422
bad input, 413 too large, 404 unknown, 409 conflict, 503 when the store cannot take a write
(nothing was stored). The one place a domain refusal (:mod:`daemon.services.errors`) becomes
an HTTP status: the app's exception handlers and the emit's own door
(:mod:`daemon.api.ingress`) both ask here."""

from __future__ import annotations

from typing import Any

import structlog
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from daemon.api.deps import Problem
from daemon.bus import BusClosed
from daemon.core.errors import describe, field_errors
from daemon.core.signal import SignalRejected, SignalTooLarge
from daemon.services.errors import Conflict, Invalid, NotFound, Refused
from daemon.store import StoreLost, WriterClosed

log = structlog.get_logger("cambium.api")

REFUSAL_STATUS: dict[type[Refused], int] = {NotFound: 404, Conflict: 409, Invalid: 422}
# What the app's handlers are registered for (beside FastAPI's own request validation).
ANSWERED: tuple[type[Exception], ...] = (
    Problem,
    Refused,
    SignalRejected,
    ValidationError,
    BusClosed,
    SQLAlchemyError,
    WriterClosed,
    StoreLost,
)


def problem_of(exc: Exception, path: str) -> Problem | None:
    """The answer to ``exc`` raised while serving ``path``; None for a failure of ours (a
    500)."""
    if isinstance(exc, Problem):
        return exc
    if isinstance(exc, Refused):
        status = next(s for kind, s in REFUSAL_STATUS.items() if isinstance(exc, kind))
        return Problem(status, str(exc))
    if isinstance(exc, SignalRejected):
        return Problem(413 if isinstance(exc, SignalTooLarge) else 422, str(exc), exc.errors)
    if isinstance(exc, ValidationError):
        errors = field_errors(exc.errors())
        return Problem(422, describe(errors), errors)
    if isinstance(exc, BusClosed):
        return Problem(503, "the daemon is shutting down; nothing was stored")
    if isinstance(exc, SQLAlchemyError | WriterClosed | StoreLost):
        log.error("store unavailable", path=path, error=str(exc))
        why = str(exc) if isinstance(exc, StoreLost) else type(exc).__name__
        return Problem(503, f"the store cannot be written; nothing was stored ({why})")
    return None


def problem_body(problem: Problem) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": problem.detail}
    if problem.errors:
        body["errors"] = [e.model_dump() for e in problem.errors]
    return body
