"""What the routes need from the running daemon, handed to them as FastAPI dependencies,
and the answers other than success a route gives itself."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request, Response

from daemon.core.errors import FieldError
from daemon.services.commands import Outcome
from daemon.services.running import Services


class Problem(Exception):
    """An answer other than success: ``status``, a readable ``detail``, field errors."""

    def __init__(self, status: int, detail: str, errors: list[FieldError] | None = None) -> None:
        self.status = status
        self.detail = detail
        self.errors = errors or []


async def _services(request: Request) -> Services:
    # Async, though it awaits nothing: FastAPI runs a plain function dependency in a worker
    # thread, a hop that cost every request more CPU than the route's own work.
    services: Services = request.app.state.services
    return services


Running = Annotated[Services, Depends(_services)]


def not_applied(outcome: Outcome, response: Response) -> dict[str, Any]:
    """The 202 a command stored but not applied yet is answered with."""
    response.status_code = 202
    return {"detail": f"stored as signal {outcome.signal_id}; not applied yet"}
