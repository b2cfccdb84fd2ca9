"""HTTP/1.1 to the daemon with the standard library alone (``http.client``): over its Unix
socket, or loopback TCP. One kept-alive connection, opened on the first request.

What :class:`~daemon.client.Client` and the CLI's reads stand on. It imports neither httpx
nor pydantic, so a command that only asks the running daemon something starts in about the
time Python takes; it builds no TLS context unless the URL is ``https``.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from daemon.client._errors import DaemonError, error_for
from daemon.core.errors import FieldError

HOST = "cambium"  # the Host a socket request names (the daemon answers any)


class NotSent(Exception):
    """Nothing reached the daemon (no socket, nobody listening): nothing can be stored."""


class NoAnswer(Exception):
    """The request may have reached the daemon, but no whole answer came back."""


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    body: bytes

    def json(self) -> Any:
        """The body as JSON; an error answer raises the :class:`DaemonError` for it."""
        try:
            parsed = json.loads(self.body)
        except ValueError:
            parsed = {"detail": self.body.decode("utf-8", "replace").strip() or self.reason}
        if 200 <= self.status < 300:
            return parsed
        raise _error(self.status, parsed)


def _error(status: int, body: Any) -> DaemonError:
    detail = str(body.get("detail", body)) if isinstance(body, dict) else str(body)
    raw = body.get("errors") if isinstance(body, dict) else None
    errors = [FieldError(field=str(e["field"]), message=str(e["message"])) for e in raw or []]
    return error_for(status, detail, errors)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__(HOST)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class Wire:
    """Requests to one daemon: at ``socket``, or at ``url`` (loopback, already checked by
    the caller) with ``headers`` (its bearer token) on each."""

    def __init__(
        self, socket_path: Path | None, url: str | None, headers: dict[str, str] | None = None
    ) -> None:
        self.headers = {"Accept": "application/json", **(headers or {})}
        self._connection = _connection(socket_path, url)
        self._prefix = "" if url is None else urlsplit(url).path.rstrip("/")

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        timeout: float,
    ) -> Answer:
        """One request and its whole answer. :class:`NotSent` when the connection could not
        be made; :class:`NoAnswer` when it failed after that."""
        target = self._prefix + (f"{path}?{urlencode(params)}" if params else path)
        headers = dict(self.headers)
        content = None
        if body is not None:
            content = json.dumps(body, ensure_ascii=False, allow_nan=False).encode()
            headers["Content-Type"] = "application/json"
        connection = self._connection
        connection.timeout = timeout
        if connection.sock is not None:
            if _closed_by_peer(connection.sock):
                connection.close()  # the daemon let the kept-alive connection go
            else:
                connection.sock.settimeout(timeout)
        if connection.sock is None:
            try:
                connection.connect()
            except OSError as exc:
                raise NotSent(f"{type(exc).__name__}: {exc}") from None
        try:
            connection.request(method, target, body=content, headers=headers)
            response = connection.getresponse()
            answer = Answer(response.status, response.reason, response.read())
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            raise NoAnswer(type(exc).__name__) from None
        return answer

    def close(self) -> None:
        self._connection.close()


def _connection(socket_path: Path | None, url: str | None) -> http.client.HTTPConnection:
    if url is None:
        assert socket_path is not None
        return _UnixConnection(str(socket_path))
    parts = urlsplit(url)
    if parts.scheme == "https":
        import ssl

        return http.client.HTTPSConnection(
            parts.hostname or "", parts.port, context=ssl.create_default_context()
        )
    return http.client.HTTPConnection(parts.hostname or "", parts.port)


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether an idle kept-alive connection was closed by the daemon (it reads as ready,
    with nothing or the end of the stream to read), so the next request opens a new one
    rather than being lost on it."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)
