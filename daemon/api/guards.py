"""What guards the API before any route runs: the body's length and time to arrive, and on
loopback TCP the bearer token. Used by the daemon's door (:mod:`daemon.api.ingress`), which
checks them for the emit it answers itself and for everything it hands on."""

from __future__ import annotations

import asyncio
import hmac

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send


async def respond(
    send: Send, status: int, body: bytes, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    """A whole JSON answer."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def refuse(
    send: Send, status: int, detail: str, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    await respond(send, status, orjson.dumps({"detail": detail}), headers)


async def read_body(
    scope: Scope, receive: Receive, send: Send, max_bytes: int, timeout_seconds: float
) -> bytes | None:
    """The request's body in one piece; None when it was refused (413 over ``max_bytes``,
    declared or streamed in chunks; 408 when it does not arrive within ``timeout_seconds``:
    a client that trickles a body cannot hold a connection forever) or the client left."""
    declared = dict(scope["headers"]).get(b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        await refuse(send, 413, f"request body over {max_bytes} bytes")
        return None
    body = bytearray()
    try:
        # asyncio's own timeout: anyio's cancel scope costs several times as much CPU, and
        # every emit pays it (the daemon runs on asyncio, under uvicorn).
        async with asyncio.timeout(timeout_seconds):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return None  # the client went away
                body += message.get("body", b"")
                if len(body) > max_bytes:
                    await refuse(send, 413, f"request body over {max_bytes} bytes")
                    return None
                if not message.get("more_body", False):
                    return bytes(body)
    except TimeoutError:
        await refuse(send, 408, f"request body not received within {timeout_seconds:g} s")
    return None


class BodyLimit:
    """Reads the request body (:func:`read_body`) before any route runs; the route then gets
    it in one piece."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_seconds: float = 30.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_seconds = timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await read_body(scope, receive, send, self.max_bytes, self.timeout_seconds)
        if body is None:
            return
        whole: Message = {"type": "http.request", "body": body, "more_body": False}
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()  # after the body: a disconnect, when it comes
            delivered = True
            return whole

        await self.app(scope, replay, send)


def bearer_ok(scope: Scope, expected: bytes) -> bool:
    """Whether the request carries ``Authorization: Bearer <expected>``. The scheme is
    case-insensitive (RFC 9110 §11.1); the token is compared in constant time."""
    given: bytes = dict(scope["headers"]).get(b"authorization", b"")
    scheme, _, credentials = given.strip().partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), expected)


async def refuse_unauthorized(send: Send) -> None:
    await refuse(send, 401, "a bearer token is required", ((b"www-authenticate", b"Bearer"),))
