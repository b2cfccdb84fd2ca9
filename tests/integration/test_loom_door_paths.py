"""Issue 26, finding 2: the Loom door forwards Loom's pages and nothing else.

The real door (uvicorn on a loopback port) in front of a recording HTTP server on a Unix
socket standing in for the daemon; requests go out as raw bytes, so no client library
tidies the paths first. Whatever the path, the daemon may only ever be asked for
``/loom`` or below, and only by a request naming the door in ``Host`` and ``Origin``.
"""

from __future__ import annotations

import socketserver
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import anyio
import pytest

from daemon.loom.proxy import COOKIE, LoomProxy, normalized_path
from daemon.server import bind_tcp, make_server

# Each tries to reach the JSON API (or anything outside /loom) through the door.
TRAVERSALS = [
    "/v1/health",
    "/v1/observations",
    "/loom/../v1/health",
    "/loom/../../v1/health",
    "/loom/..%2fv1/health",
    "/loom/..%2Fv1/health",
    "/loom/%2e%2e/v1/health",
    "/loom/%2E%2E%2Fv1%2Fhealth",
    "/loom/.%2e/v1/health",
    "/loom/%252e%252e/v1/health",  # doubled
    "/loom/..%252fv1/health",
    "/loom/%25252e%25252e%25252fv1/health",  # tripled
    "/loom/..\\v1/health",
    "/loom/..%5cv1/health",
    "/loom/..%255cv1/health",
    "/loom\\..\\v1\\health",
    "/loom/./..\\/v1/health",
    "/loom/.;/../v1/health",
    "/loom/..;/v1/health",
    "/loom;x=1/../v1/health",
    "/loom/marks/../../v1/health",
    "//loom/../v1/health",
    "/loomx/../v1/health",
    "/loomx",
    "/loomx/",
    "/loom-evil/",
    "/loom..",
    "/loom%2e%2e/v1/health",
    "/loom%2f..%2fv1/health",
    "/LOOM/../v1/health",
    "/%6coom/../v1/health",
    "/loom/%ff/../../v1/health",
]


@dataclass
class Recorder:
    """The daemon's side of the socket: every path asked for, answered 201."""

    paths: list[str] = field(default_factory=list)


@pytest.fixture
def daemon_socket(tmp_path: Path) -> Iterator[tuple[Path, Recorder]]:
    recorder = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            recorder.paths.append(self.path)
            length = int(self.headers.get("content-length", 0))
            self.rfile.read(length)
            self.send_response(201)
            self.send_header("content-length", "7")
            self.end_headers()
            self.wfile.write(b"stored\n")

        do_GET = do_POST = _answer

    path = tmp_path / "daemon.sock"
    server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield path, recorder
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Door:
    proxy: LoomProxy
    port: int

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def send(self, method: str, target: str, **headers: str) -> tuple[int, bytes]:
        """One raw request; the status and body of the answer."""
        lines = [f"{method} {target} HTTP/1.1", "connection: close"]
        headers.setdefault("host", self.host)
        headers.setdefault("cookie", f"{COOKIE}={self.proxy.session}")
        lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        async with await anyio.connect_tcp("127.0.0.1", self.port) as stream:
            await stream.send(request)
            answer = b""
            try:
                while chunk := await stream.receive():
                    answer += chunk
            except anyio.EndOfStream:
                pass
        head, _, body = answer.partition(b"\r\n\r\n")
        return int(head.split()[1]), body


@asynccontextmanager
async def open_door(socket: Path) -> AsyncIterator[Door]:
    """The door served in this task (a fixture's teardown would run in another)."""
    listener = bind_tcp("127.0.0.1", 0)
    port: int = listener.getsockname()[1]
    proxy = LoomProxy(socket, f"127.0.0.1:{port}")
    server = make_server(proxy, grace_period=1.0)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve, [listener])
        while not server.started:  # noqa: ASYNC110 (uvicorn has no started event)
            await anyio.sleep(0.01)
        yield Door(proxy, port)
        server.should_exit = True
    await proxy.aclose()
    listener.close()


@pytest.mark.asyncio
async def test_no_path_outside_loom_reaches_the_daemon(
    daemon_socket: tuple[Path, Recorder],
) -> None:
    let_through = []
    async with open_door(daemon_socket[0]) as door:
        for target in TRAVERSALS:
            for method in ("GET", "POST"):
                status, _ = await door.send(method, target)
                if status not in (400, 404):
                    let_through.append((method, target, status))
    assert let_through == []
    assert daemon_socket[1].paths == []


@pytest.mark.asyncio
async def test_loom_paths_are_forwarded_as_the_daemon_will_read_them(
    daemon_socket: tuple[Path, Recorder],
) -> None:
    async with open_door(daemon_socket[0]) as door:
        for target in ("/loom/health", "/loom/marks/../health", "/loom/./%68ealth", "/loom//x/"):
            status, _ = await door.send("GET", target)
            assert status == 201, target
    assert daemon_socket[1].paths == ["/loom/health", "/loom/health", "/loom/health", "/loom/x/"]


@pytest.mark.asyncio
async def test_a_request_naming_another_host_or_origin_is_refused(
    daemon_socket: tuple[Path, Recorder],
) -> None:
    """DNS rebinding: a page at evil.example:PORT, its name rebound to 127.0.0.1, names its
    own host; a page elsewhere that posts here names its own origin."""
    async with open_door(daemon_socket[0]) as door:
        for headers in (
            {"host": f"evil.example:{door.port}"},
            {"host": "127.0.0.1"},
            {"host": f"localhost:{door.port}"},
            {"origin": "http://evil.example"},
            {"origin": "null"},
            {"origin": f"http://localhost:{door.port}"},
        ):
            status, body = await door.send("POST", "/loom/seeds/x/review", **headers)
            assert status == 403 and b"wrong" in body, headers
        assert daemon_socket[1].paths == []
        own = f"http://{door.host}"
        status, _ = await door.send("POST", "/loom/seeds/x/review", origin=own)
    assert status == 201 and daemon_socket[1].paths == ["/loom/seeds/x/review"]


def test_normalized_path() -> None:
    assert normalized_path(b"/loom/") == "/loom/"
    assert normalized_path(b"/loom") == "/loom"
    assert normalized_path(b"/loom/a/./b/../c") == "/loom/a/c"
    assert normalized_path(b"/loom/%252e%252e/x") == "/x"
    assert normalized_path(b"/loom/../..") is None  # above the root
    assert normalized_path(b"/%2525252525252e") is None  # never settles
    assert normalized_path("/loom/é".encode("latin-1")) is None  # not UTF-8
    assert normalized_path("/loom/é".encode()) == "/loom/é"
