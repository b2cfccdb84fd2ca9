"""The loopback door to Loom that ``cambium loom`` opens for a browser.

A browser cannot speak HTTP over a Unix socket, so this small server listens on a random
127.0.0.1 port and forwards ``/loom`` requests to the daemon's socket. It admits one
browser: the link it prints carries a one-time ticket, which the first visit trades for a
session cookie (HttpOnly, SameSite=Strict) and which is then spent. Anyone else on the
machine who finds the port gets 401.

It opens Loom's pages and nothing else of the daemon. The path is decided on as the daemon
will read it: percent-decoded until nothing changes (a doubled ``%252e`` too), ``\\`` read
as ``/``, ``;`` parameters dropped, dot segments resolved; only ``/loom`` and below is
forwarded, and as that normalised path, so ``/loom/..%2fv1/`` can never reach the JSON API.
A request must name the door itself in ``Host`` (a page whose DNS name was rebound to
127.0.0.1 names its own) and, when it has an ``Origin``, come from the door's origin.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, unquote, urlencode

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import Receive, Scope, Send

from daemon.loom.forward import DaemonConnections, NotForwarded

COOKIE = "cambium_loom"
TICKET_SECONDS = 120.0
# Headers that describe one connection, not the message; never forwarded.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "upgrade", "te", "trailer",
     "proxy-authorization", "proxy-authenticate", "content-length", "cookie"}
)  # fmt: skip
# The daemon's own; the door's server writes its own of each.
SERVER_HEADERS = frozenset({"date", "server"})
FORWARD_SECONDS = 30.0
PREFIX = "/loom"
DECODE_ROUNDS = 4  # a path still changing after this many percent-decodings is refused


def normalized_path(raw: bytes) -> str | None:
    """``raw`` (a request target's path, still percent-encoded) as an absolute path with
    no encoding, no ``\\``, no ``;`` parameters, no empty or dot segments; None when it
    is not UTF-8, does not settle or climbs above the root."""
    try:
        path = raw.decode()
        for _ in range(DECODE_ROUNDS):
            decoded = unquote(path, errors="strict")
            if decoded == path:
                break
            path = decoded
        else:
            return None
    except UnicodeDecodeError:
        return None
    return _resolved(path)


def _resolved(path: str) -> str | None:
    """``path`` (decoded) with its dot segments resolved; None when it climbs above the root."""
    segments: list[str] = []
    for segment in path.replace("\\", "/").split("/"):
        segment = segment.split(";", 1)[0]
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                return None
            segments.pop()
        else:
            segments.append(segment)
    return "/" + "/".join(segments) + ("/" if path.endswith("/") and segments else "")


def is_loom(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


class LoomProxy:
    """ASGI app: ticket and cookie check, then forward to the daemon's Unix socket."""

    def __init__(
        self,
        socket: Path,
        host: str,
        *,
        ticket_seconds: float = TICKET_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.socket = socket
        self.host = host  # "127.0.0.1:PORT": the only Host a request may name
        self.origin = f"http://{host}"
        # Its connections to the daemon, kept for the door's life.
        self.daemon = DaemonConnections(socket, FORWARD_SECONDS)
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

    async def aclose(self) -> None:
        await self.daemon.aclose()

    async def _respond(self, request: Request) -> Response:
        refusal = self._foreign(request)
        if refusal is not None:
            return PlainTextResponse(refusal, status_code=403)
        raw: bytes = request.scope.get("raw_path") or request.url.path.encode()
        path = normalized_path(raw)
        if path is None or not is_loom(path):
            return PlainTextResponse("not found: only /loom is served here", status_code=404)
        ticket = request.query_params.get("ticket")
        if ticket is not None:
            return self._redeem(request, path, ticket)
        cookie = request.cookies.get(COOKIE, "")
        if not hmac.compare_digest(cookie.encode(), self.session.encode()):
            return PlainTextResponse(
                "not signed in: open the link `cambium loom` printed", status_code=401
            )
        return await self._forward(request, path)

    def _foreign(self, request: Request) -> str | None:
        """Why this request is not the door's own browser's, or None if it may be."""
        if request.headers.get("host", "").lower() != self.host:
            return f"wrong host: this door answers to {self.host} only"
        origin = request.headers.get("origin")
        if origin is not None and origin.lower() != self.origin:
            return f"wrong origin: this door takes requests from {self.origin} only"
        return None

    def _redeem(self, request: Request, path: str, ticket: str) -> Response:
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
        target = URL(path=quote(path), query=urlencode(rest))
        response = RedirectResponse(str(target), status_code=303)
        response.set_cookie(COOKIE, self.session, httponly=True, samesite="strict", path="/loom")
        return response

    async def _forward(self, request: Request, path: str) -> Response:
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        # Re-quoted, so that nothing in it can end the request line it is written into.
        query = quote(request.url.query, safe="=&%+;,/?:@!$'()*~")
        target = quote(path) + (f"?{query}" if query else "")
        try:
            answer = await self.daemon.request(
                request.method, target, headers, await request.body()
            )
        except NotForwarded:
            return PlainTextResponse(
                f"the daemon is not reachable at {self.socket}: start it with `cambium run`",
                status_code=502,
            )
        dropped = HOP_BY_HOP | SERVER_HEADERS
        kept = [(k, v) for k, v in answer.headers if k.lower() not in dropped]
        response = Response(b"".join(answer.body), status_code=answer.status)
        response.raw_headers += [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in kept
        ]
        return response
