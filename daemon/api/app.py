"""The HTTP API (FastAPI): one router per resource (signals, recall, context, seeds,
governance, health), and the handlers that answer every failure as
:mod:`daemon.api.problems` says. Loom's pages are mounted beside it by the composition
(:mod:`daemon.composition`); ``POST /v1/signals`` is served in front of it by
:class:`daemon.api.ingress.Ingress` (documented here all the same)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from daemon import __version__
from daemon.api import context, governance, health, marks, recall, seeds, signals
from daemon.api.deps import Problem
from daemon.api.problems import ANSWERED, problem_body, problem_of
from daemon.core.errors import describe, field_errors
from daemon.services.running import Services


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

    async def _answer(request: Request, exc: Exception) -> JSONResponse:
        problem = problem_of(exc, request.url.path)
        if problem is None:  # (registered only for what it answers)
            raise exc
        return JSONResponse(problem_body(problem), status_code=problem.status)

    for kind in ANSWERED:
        app.add_exception_handler(kind, _answer)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own checks (query parameters, JSON bodies) in the same shape as ours:
        # the field named without its "query."/"body." prefix.
        errors = field_errors(exc.errors(), skip_location=1)
        problem = Problem(422, describe(errors), errors)
        return JSONResponse(problem_body(problem), status_code=422)

    return app
