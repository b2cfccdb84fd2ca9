"""Loom's door to the daemon's socket: one kept-alive connection serves page after page, a
connection the daemon let go while idle is replaced, and an answer cut short is a failure,
never half a page. Against a stand-in daemon on a real Unix socket that counts its
connections and speaks HTTP/1.1 as uvicorn does (headers, then the body, written apart)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from daemon.loom.forward import DaemonConnections, NotForwarded


@dataclass
class StandIn:
    connections: int = 0
    targets: list[str] = field(default_factory=list)
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    cut_short: bool = False  # answer with half the body, then hang up


@asynccontextmanager
async def stand_in(path: Path) -> AsyncIterator[StandIn]:
    state = StandIn()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        state.writers.append(writer)
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            state.targets.append(head.split(b" ")[1].decode())
            body = f"page {len(state.targets)}".encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n")
            writer.write(b"content-length: %d\r\n\r\n" % len(body))
            writer.write(body[:3] if state.cut_short else body)
            await writer.drain()
            if state.cut_short:
                writer.close()
                return

    server = await asyncio.start_unix_server(serve, path=str(path))
    try:
        yield state
    finally:
        server.close()


@pytest.mark.asyncio
async def test_pages_share_one_connection_and_a_dropped_one_is_replaced(tmp_path: Path) -> None:
    socket = tmp_path / "daemon.sock"
    async with stand_in(socket) as daemon:
        door = DaemonConnections(socket, seconds=5)
        pages = [await door.request("GET", f"/loom/{n}", [], b"") for n in range(3)]
        assert [b"".join(p.body) for p in pages] == [b"page 1", b"page 2", b"page 3"]
        assert [p.status for p in pages] == [200] * 3 and daemon.connections == 1
        assert ("content-type", "text/plain") in pages[0].headers

        daemon.writers[0].close()  # what uvicorn does to a connection idle too long
        again = await door.request("GET", "/loom/seeds", [], b"")
        assert b"".join(again.body) == b"page 4" and daemon.connections == 2
        assert daemon.targets[-1] == "/loom/seeds"

        daemon.cut_short = True
        with pytest.raises(NotForwarded):
            await door.request("GET", "/loom/marks", [], b"")
        await door.aclose()


@pytest.mark.asyncio
async def test_no_daemon_is_not_forwarded(tmp_path: Path) -> None:
    door = DaemonConnections(tmp_path / "nobody.sock", seconds=5)
    with pytest.raises(NotForwarded):
        await door.request("GET", "/loom/", [], b"")
