"""HTTP/1.1 from Loom's door to the daemon's Unix socket, for the door's life: kept-alive
connections reused one request at a time, each request written whole, each answer read with
httptools' parser (the C parser the daemon's own server uses) and passed on as it came.

httpx did this before, and its client, pool and streams cost the door more CPU per page
than all the rest of its work; a door is one browser's, so a few connections serve it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httptools

# Methods that change nothing: one whose kept-alive connection turns out to have been closed
# before a byte of the answer came is sent again, on a new connection.
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
_CHUNK = 1 << 16

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class NotForwarded(Exception):
    """The daemon could not be reached, or no whole answer came."""


@dataclass
class Answer:
    status: int = 0
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: list[bytes] = field(default_factory=list)
    headed: bool = False
    complete: bool = False
    keep_alive: bool = False  # the daemon keeps the connection open after this answer
    parser: httptools.HttpResponseParser | None = None

    # httptools' callbacks
    def on_headers_complete(self) -> None:
        self.headed = True
        # Asked now: once the message is complete the parser has moved on.
        self.keep_alive = self.parser is not None and self.parser.should_keep_alive()

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class DaemonConnections:
    """Requests to the daemon at ``socket``, each answered within ``seconds``."""

    def __init__(self, socket: Path, seconds: float) -> None:
        self.socket = socket
        self.seconds = seconds
        self._idle: list[Connection] = []

    async def request(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> Answer:
        lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
        lines.append(f"content-length: {len(body)}")
        message = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        try:
            with anyio.fail_after(self.seconds):
                connection, reused = await self._connection()
                try:
                    answer = await self._exchange(connection, message, method)
                except OSError:
                    if not (reused and method in _SAFE):
                        raise
                    answer = Answer()
                if not answer.status and reused and method in _SAFE:
                    connection, _ = await self._connection(new=True)
                    answer = await self._exchange(connection, message, method)
        except (OSError, TimeoutError, httptools.HttpParserError) as exc:
            raise NotForwarded(f"{type(exc).__name__}: {exc}") from None
        if not answer.complete:
            raise NotForwarded("the daemon closed the connection before answering")
        return answer

    async def _connection(self, *, new: bool = False) -> tuple[Connection, bool]:
        while self._idle and not new:
            reader, writer = self._idle.pop()
            if not reader.at_eof():
                return (reader, writer), True
            writer.close()  # the daemon let it go while it was idle
        return await asyncio.open_unix_connection(self.socket), False

    async def _exchange(self, connection: Connection, message: bytes, method: str) -> Answer:
        reader, writer = connection
        answer = Answer()
        parser = answer.parser = httptools.HttpResponseParser(answer)
        try:
            writer.write(message)
            await writer.drain()
            while not answer.complete:
                chunk = await reader.read(_CHUNK)
                if not chunk:
                    break
                parser.feed_data(chunk)
                answer.status = parser.get_status_code()
                # An answer to HEAD has no body, whatever its headers say.
                answer.complete |= method == "HEAD" and answer.headed
        except BaseException:
            writer.close()
            raise
        if answer.complete and answer.keep_alive:
            self._idle.append(connection)
        else:
            writer.close()
        return answer

    async def aclose(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()
