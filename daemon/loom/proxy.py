"""The loopback door to Loom that ``cambium loom`` opens for a browser.

A browser cannot speak HTTP over a Unix socket, so this small server listens on a random
127.0.0.1 port and forwards ``/loom`` requests to the daemon's socket. It admits one
browser: the link it prints carries a one-time ticket, which the first visit trades for a
session cookie (HttpOnly, SameSite=Strict) and which is then spent. Anyone else on the
machine who finds the port gets 401.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

import httpx
from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import Receive, Scope, Send

COOKIE = "cambium_loom"
TICKET_SECONDS = 120.0
# Headers that describe one connection, not the message; never forwarded.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "upgrade", "te", "trailer",
     "proxy-authorization", "proxy-authenticate", "content-length", "cookie"}
)  # fmt: skip
FORWARD_SECONDS = 30.0


class LoomProxy:
    """ASGI app: ticket and cookie check, then forward to the daemon's Unix socket."""

    def __init__(
        self,
        socket: Path,
        *,
        ticket_seconds: float = TICKET_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.socket = socket
        self.ticket: str | None = secrets.token_urlsafe(24)
        self.session = secrets.token_urlsafe(32)
        self.clock = clock
        self.ticket_expires = clock() + ticket_seconds
        self.last_request = clock()

    def entry_path(self) -> str:
        """The one-time path to open (before the ticket is spent)."""
        assert self.ticket is not None, "the ticket is spent"
        return "/loom/?" + urlencode({"ticket": self.ticket})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.last_request = self.clock()
        request = Request(scope, receive)
        response = await self._respond(request)
        await response(scope, receive, send)

    async def _respond(self, request: Request) -> Response:
        if not request.url.path.startswith("/loom"):
            return PlainTextResponse("not found: only /loom is served here", status_code=404)
        ticket = request.query_params.get("ticket")
        if ticket is not None:
            return self._redeem(request, ticket)
        cookie = request.cookies.get(COOKIE, "")
        if not hmac.compare_digest(cookie.encode(), self.session.encode()):
            return PlainTextResponse(
                "not signed in: open the link `cambium loom` printed", status_code=401
            )
        return await self._forward(request)

    def _redeem(self, request: Request, ticket: str) -> Response:
        valid = (
            self.ticket is not None
            and self.clock() <= self.ticket_expires
            and hmac.compare_digest(ticket.encode(), self.ticket.encode())
        )
        if not valid:
            return PlainTextResponse(
                "this link was used already or has expired: run `cambium loom` again",
                status_code=403,
            )
        self.ticket = None  # one time only
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "ticket"]
        target = URL(path=request.url.path, query=urlencode(rest))
        response = RedirectResponse(str(target), status_code=303)
        response.set_cookie(COOKIE, self.session, httponly=True, samesite="strict", path="/loom")
        return response

    async def _forward(self, request: Request) -> Response:
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        transport = httpx.AsyncHTTPTransport(uds=str(self.socket))
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://cambium") as client:
                answer = await client.request(
                    request.method,
                    request.url.path,
                    params=request.url.query,
                    headers=headers,
                    content=await request.body(),
                    timeout=FORWARD_SECONDS,
                )
        except httpx.TransportError:
            return PlainTextResponse(
                f"the daemon is not reachable at {self.socket}: start it with `cambium run`",
                status_code=502,
            )
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
        kept.pop("content-encoding", None)  # httpx has decoded the body already
        return Response(answer.content, status_code=answer.status_code, headers=kept)
