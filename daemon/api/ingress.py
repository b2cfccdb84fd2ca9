"""The daemon's door: the ASGI app the Unix socket (and loopback TCP, behind the bearer
token) serves.

``POST /v1/signals``, the request agents send most, is answered here, in front of the
router: its length and (on TCP) its token checked, then the signal emitted
(:func:`daemon.api.signals.emit_signal`) and the answer written, without FastAPI's
middleware, routing and request objects, which cost more than the emit itself. So is
``GET /v1/health``, which supervisors and ``cambium status`` poll. Their routes in the app
still document them (``/openapi.json``). A path no route can match is answered 404
here too; everything else goes on to the app, its body read first (:class:`BodyLimit`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import parse_qsl

import orjson
from fastapi import FastAPI
from starlette.routing import Mount
from starlette.types import Receive, Scope, Send

from daemon.api import health
from daemon.api.guards import BodyLimit, bearer_ok, read_body, refuse_unauthorized, respond
from daemon.api.problems import problem_body, problem_of
from daemon.api.signals import emit_signal
from daemon.services.running import Services

EMIT_PATH = "/v1/signals"
HEALTH_PATH = "/v1/health"
NOT_FOUND = b'{"detail":"Not Found"}'  # as the router answers it


class Ingress:
    def __init__(
        self,
        app: FastAPI,
        services: Services,
        max_bytes: int,
        token: str | None = None,
        timeout_seconds: float = 30.0,
    ) -> None:
        self.api = app
        self.app = BodyLimit(app, max_bytes, timeout_seconds)
        self.services = services
        self.max_bytes = max_bytes
        self.timeout_seconds = timeout_seconds
        self.token = None if token is None else token.encode()
        self.paths = RoutePaths(app)

    def with_token(self, token: str) -> Ingress:
        """The same door to the same app, for loopback TCP: 401 without the bearer token."""
        return Ingress(self.api, self.services, self.max_bytes, token, self.timeout_seconds)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.token is not None and not bearer_ok(scope, self.token):
            await refuse_unauthorized(send)
            return
        path: str = scope["path"]
        if path == EMIT_PATH and scope["method"] == "POST":
            await self._emit(scope, receive, send)
        elif path == HEALTH_PATH and scope["method"] == "GET":
            await respond(send, 200, orjson.dumps(await health.report(self.services)))
        elif self.paths.may_match(path):
            await self.app(scope, receive, send)
        else:
            await respond(send, 404, NOT_FOUND)

    async def _emit(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await read_body(scope, receive, send, self.max_bytes, self.timeout_seconds)
        if body is None:
            return
        query = dict(parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True))
        try:
            status, answer = await emit_signal(self.services, body, query.get("wait"))
        except Exception as exc:
            problem = problem_of(exc, EMIT_PATH)
            if problem is None:
                raise  # uvicorn answers 500 and logs it, as for any route
            await respond(send, problem.status, orjson.dumps(problem_body(problem)))
            return
        await respond(send, status, orjson.dumps(answer))


class RoutePaths:
    """Which request paths some route of the app could match (or redirect to with or
    without a trailing slash): every other one is a 404 without asking the router. A route
    it cannot read makes every path a possible match (the router decides, as before)."""

    def __init__(self, app: FastAPI) -> None:
        exact: set[str] = set()
        prefixes: list[str] = []
        try:
            for path, variable in _paths(app.routes, ""):
                if variable:
                    prefixes.append(path.split("{", 1)[0])
                else:
                    exact.update((path, path.rstrip("/"), path + "/"))
        except _Unreadable:
            prefixes = [""]
        self.exact = frozenset(exact)
        self.prefixes = tuple(prefixes)

    def may_match(self, path: str) -> bool:
        return path in self.exact or path.startswith(self.prefixes)


class _Unreadable(Exception):
    pass


def _paths(routes: Iterable[Any], prefix: str) -> Iterator[tuple[str, bool]]:
    """Each route's path, and whether it matches more than itself (a parameter, a mount).
    Routers included in the app are walked (FastAPI keeps them as routes of their own)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _paths(included.routes, prefix + route.include_context.prefix)
        elif isinstance(route, Mount):
            yield prefix + route.path, True
        elif isinstance(getattr(route, "path", None), str):
            yield prefix + route.path, "{" in route.path
        else:
            raise _Unreadable(route)
