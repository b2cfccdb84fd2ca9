"""ASGI wrappers that guard the API before any route runs."""

from __future__ import annotations

import hmac
import json

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send


async def _refuse(
    send: Send, status: int, detail: str, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    body = json.dumps({"detail": detail}).encode()
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


class BodyLimit:
    """Reads the request body before any route runs: 413 when it is over ``max_bytes``
    (declared or streamed in chunks), 408 when it does not arrive within
    ``timeout_seconds`` (a client that trickles a body cannot hold a connection forever).
    The route then gets the body in one piece."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_seconds: float = 30.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_seconds = timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _refuse(send, 413, f"request body over {self.max_bytes} bytes")
            return
        body = bytearray()
        with anyio.move_on_after(self.timeout_seconds) as waited:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away
                body += message.get("body", b"")
                if len(body) > self.max_bytes:
                    await _refuse(send, 413, f"request body over {self.max_bytes} bytes")
                    return
                if not message.get("more_body", False):
                    break
        if waited.cancelled_caught:
            await _refuse(send, 408, f"request body not received within {self.timeout_seconds:g} s")
            return
        whole: Message = {"type": "http.request", "body": bytes(body), "more_body": False}
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()  # after the body: a disconnect, when it comes
            delivered = True
            return whole

        await self.app(scope, replay, send)


class RequireToken:
    """401 unless the request carries ``Authorization: Bearer <token>`` (constant-time check).
    Wraps the app on the TCP listener only; the Unix socket relies on file permissions."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given: bytes = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, credentials = given.strip().partition(b" ")
            # The scheme is case-insensitive (RFC 9110 §11.1); the token is compared in
            # constant time.
            if scheme.lower() != b"bearer" or not hmac.compare_digest(
                credentials.strip(), self.expected
            ):
                await _refuse(
                    send, 401, "a bearer token is required", ((b"www-authenticate", b"Bearer"),)
                )
                return
        await self.app(scope, receive, send)
