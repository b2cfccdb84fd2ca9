"""A Unix socket that loses answers: each request is passed on to the real daemon and
answered there, then the connection to the caller is closed without a word. This is what a
caller sees when the daemon stores a write and dies (or the answer is lost) before replying."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _read_message(conn: socket.socket) -> bytes:
    """One HTTP/1.1 message with a Content-Length body (what httpx and uvicorn send)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@contextmanager
def losing_answers(daemon_socket: Path, path: Path) -> Iterator[list[bytes]]:
    """Listen on ``path``; yields the answers the daemon gave and the callers never saw."""
    lost: list[bytes] = []

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            request = _read_message(self.request)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
                upstream.connect(str(daemon_socket))
                upstream.sendall(request)
                lost.append(_read_message(upstream))
            self.request.shutdown(socket.SHUT_RDWR)  # the caller gets no answer

    server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield lost
    finally:
        server.shutdown()
        server.server_close()
        path.unlink(missing_ok=True)


@contextmanager
def never_answering(path: Path) -> Iterator[None]:
    """A socket that accepts and reads requests and never answers (a hung daemon)."""
    stop = threading.Event()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            _read_message(self.request)
            stop.wait(30)

    server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        path.unlink(missing_ok=True)
