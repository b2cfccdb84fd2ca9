"""Run the :class:`~daemon.loom.proxy.LoomProxy` on a loopback port until Ctrl-C, SIGTERM
or a stretch without requests."""

from __future__ import annotations

import signal
import socket
import webbrowser
from pathlib import Path

import anyio
import click
import uvicorn

from daemon.loom.proxy import LoomProxy
from daemon.server import bind_tcp, make_server


async def serve_door(socket_path: Path, port: int, idle_seconds: float, open_browser: bool) -> None:
    listener = bind_tcp("127.0.0.1", port)
    proxy = LoomProxy(socket_path, f"127.0.0.1:{_port(listener)}")
    url = f"{proxy.origin}{proxy.entry_path()}"
    click.echo(f"Loom: {url}")
    click.echo(f"(a one-time link; stops on Ctrl-C or after {idle_seconds / 60:g} idle minutes)")
    if open_browser:
        webbrowser.open(url)
    server = make_server(proxy, grace_period=1.0)
    stop = anyio.Event()
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_until_signalled, stop)
            tasks.start_soon(_until_idle, proxy, idle_seconds, stop)
            tasks.start_soon(_stop_server, server, stop)
            await server.serve([listener])
            tasks.cancel_scope.cancel()
    finally:
        await proxy.aclose()
        listener.close()


def _port(listener: socket.socket) -> int:
    port: int = listener.getsockname()[1]
    return port


async def _stop_server(server: uvicorn.Server, stop: anyio.Event) -> None:
    await stop.wait()
    server.should_exit = True  # it finishes the requests in flight, then serve() returns


async def _until_signalled(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
        async for _ in received:
            stop.set()
            return


async def _until_idle(proxy: LoomProxy, idle_seconds: float, stop: anyio.Event) -> None:
    # Each request moves the deadline on; sleeping until it is cheaper than an Event per
    # request.
    while (left := proxy.last_request + idle_seconds - proxy.clock()) > 0:  # noqa: ASYNC110
        await anyio.sleep(left)
    stop.set()
