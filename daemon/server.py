"""Listening sockets and the uvicorn servers that serve the API on them.

The Unix socket is created mode 0600 inside a directory that must be private (0700). A stale
socket left by a crash is replaced; a socket some live daemon answers on is never stolen.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp


class IngressError(RuntimeError):
    """The ingress cannot listen where it is configured to."""


class IngressConfigError(IngressError):
    """Where the ingress is configured to listen cannot be used as it is (a config problem)."""


def bind_unix(path: Path) -> socket.socket:
    directory = path.parent
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = stat.S_IMODE(directory.stat().st_mode)
    except OSError as exc:
        raise IngressConfigError(
            f"ingress.socket: cannot use directory {directory}: {exc.strerror}"
        ) from None
    if mode & 0o077:
        raise IngressConfigError(
            f"ingress.socket: directory {directory} is open to other users (mode {mode:04o}); "
            "use a private directory (mode 0700)"
        )
    _clear_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # no window in which the socket is group/world accessible
    try:
        sock.bind(str(path))
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(512)
    sock.setblocking(False)
    return sock


def _clear_stale(path: Path) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise IngressConfigError(
            f"ingress.socket: {path} exists and is not a socket; not touching it"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        path.unlink(missing_ok=True)  # nobody answers: left behind by a crash
        return
    finally:
        probe.close()
    raise IngressError(f"another daemon is already listening on {path}")


def bind_tcp(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Named as TCP, so asyncio turns Nagle's algorithm off on each connection it accepts (it
    # looks for IPPROTO_TCP): otherwise an answer written as headers, then body, waited for
    # the client's delayed ACK, 40 ms a page through Loom's door.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise IngressError(f"ingress.tcp: cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(512)
    sock.setblocking(False)
    return sock


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The daemon handles SIGTERM/SIGINT itself and tells the server when to stop.
        yield


def make_server(app: ASGIApp, grace_period: float) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,
        access_log=False,
        http="httptools",
        # Nothing stands in front of the daemon: no proxy's headers to believe (and no
        # middleware to pay for on every request).
        proxy_headers=False,
        timeout_graceful_shutdown=max(1, int(grace_period)),
    )
    return _Server(config)
