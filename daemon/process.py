"""The daemon process: ``cambium run``.

Start-up order: load config (done by the caller), build the daemon from it
(:mod:`daemon.composition`, which checks everything that can be checked before touching
anything), claim the socket, apply migrations, start the bus (which replays
unfinished deliveries), the ingress, the rhythms and the substrate watcher, then report
ready. SIGTERM/SIGINT: stop accepting, let in-flight deliveries finish within the grace
period, exit. It never forks; systemd or launchd supervise it.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import socket
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import structlog
import uvicorn

from daemon import __version__
from daemon.composition import Daemon, compose
from daemon.config import Config
from daemon.core.clock import Clock, utcnow
from daemon.files.daily_watch import watch_daily
from daemon.files.watcher import watch_substrate
from daemon.sdnotify import notify, watchdog_interval
from daemon.server import bind_tcp, bind_unix, make_server
from daemon.services.recall import MARKS_LOOK, Memory
from daemon.store import Store, StoreLock, check_sqlite_file
from daemon.store.migrate import HEAD, current_revision, upgrade_in_child_process

log = structlog.get_logger("cambium.daemon")

# How long a stop waits for the embedding worker, which the stop interrupts mid-batch: what
# it had stored is kept, and the next start goes on from there.
EMBEDDING_STOP_SECONDS = 3.0


def event_loop_options() -> dict[str, Any]:
    """anyio's options for the daemon's event loop: uvloop's, where it is installed
    (``uvicorn[standard]`` brings it; not on Windows). Its transports and callbacks are C:
    the daemon's CPU per ``POST`` fell from 0.54-0.73 to 0.46-0.60 ms (8 clients, paired)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


async def run_daemon(config: Config, *, clock: Clock = utcnow) -> None:
    """Run until SIGTERM or SIGINT. Raises ConfigError before anything is touched."""
    daemon = compose(config, clock)
    lock = StoreLock(config.store.url)
    lock.acquire()  # before anything is written: one daemon per store
    sockets = []
    try:
        sockets.append(bind_unix(config.ingress.socket))
        tcp = config.ingress.tcp_address
        if tcp is not None:
            sockets.append(bind_tcp(*tcp))
        check_sqlite_file(config.store.url)
        # A store already at the head needs no migration process (Alembic's start costs
        # about a second of the daemon's start).
        if await anyio.to_thread.run_sync(current_revision, config.store.url) != HEAD:
            await upgrade_in_child_process(config.store.url)
        daemon.store.start()
        worker = daemon.memory.semantic.worker if daemon.memory.semantic else None
        try:
            if worker is not None:
                # Before serving: opening reads where each mark's vector belongs, which
                # holds the interpreter (0.1-0.2 s at 100,000 marks) and stalled the
                # recalls beside it. If it fails, the worker's start tries again (and the
                # daemon serves, ranking by words, as when its worker fails later).
                try:
                    await anyio.to_thread.run_sync(worker.vectors.open)
                except Exception:
                    log.exception("the stored vectors could not be opened")
                worker.start()  # embeds in the background; recall never waits for it
            await _serve(config, daemon, sockets)
        finally:
            if worker is not None and not await anyio.to_thread.run_sync(
                worker.stop, EMBEDDING_STOP_SECONDS
            ):
                log.warning("the embedding worker did not stop in time; leaving it")
            daemon.store.close()
    finally:
        for sock in sockets:
            sock.close()
        if sockets:
            config.ingress.socket.unlink(missing_ok=True)
        lock.release()


async def _serve(config: Config, daemon: Daemon, sockets: list[socket.socket]) -> None:
    bus, scheduler, memory = daemon.bus, daemon.scheduler, daemon.memory
    memory.preparing.set()  # (before any recall can come: see _keep_recall_current)
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(bus)
        servers: list[uvicorn.Server] = []
        stop_watching = anyio.Event()
        async with anyio.create_task_group() as tasks:
            served = []
            for index, sock in enumerate(sockets):
                app = daemon.socket_app if index == 0 else daemon.tcp_app
                server = make_server(app, config.bus.grace_period)
                servers.append(server)
                done = anyio.Event()
                served.append(done)
                tasks.start_soon(_serve_until_done, server, sock, done)
            await scheduler.start()
            _keep_recall_current(tasks, memory, config.recall.semantic, stop_watching)
            while not all(server.started for server in servers):  # noqa: ASYNC110 (uvicorn has no event for it)
                await anyio.sleep(0.01)
            interval = watchdog_interval()
            if interval:
                tasks.start_soon(_watchdog, daemon.store, interval)
            notify("READY=1")
            log.info(
                "ready",
                version=__version__,
                socket=str(config.ingress.socket),
                tcp=config.ingress.tcp,
                store=daemon.store.dialect,
                receptors=[r.key for r in bus.receptors],
                loop=type(asyncio.get_running_loop()).__module__.partition(".")[0],
            )
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
                async for signum in received:
                    log.info("stopping", signal=signal.Signals(signum).name)
                    break
            memory.stopping.set()  # a preparation of the index in flight stops at its next file
            notify("STOPPING=1")
            for server in servers:
                server.should_exit = True  # stop accepting; finish requests in flight
            await scheduler.stop()
            stop_watching.set()
            await bus.close()
            with anyio.move_on_after(config.bus.grace_period):
                for done in served:
                    await done.wait()
            tasks.cancel_scope.cancel()
    log.info("stopped")


def _keep_recall_current(
    tasks: anyio.abc.TaskGroup, memory: Memory, semantic: bool, stop_watching: anyio.Event
) -> None:
    """Start what keeps recall's indexes current: at once for what changed while the daemon
    was down (recall answers meanwhile), then as the store and the files change."""
    on_change = None
    if semantic:
        # Read what changed now and wake the embedding worker for it, not during a recall.
        def on_change(_: set[Path]) -> None:
            tasks.start_soon(_prepare_recall, memory)

    tasks.start_soon(_prepare_recall, memory)
    tasks.start_soon(index_stored_marks, memory)
    tasks.start_soon(partial(watch_substrate, on_change=on_change), memory.substrate, stop_watching)
    tasks.start_soon(watch_daily, memory.daily, stop_watching)


async def _serve_until_done(server: uvicorn.Server, sock: socket.socket, done: anyio.Event) -> None:
    try:
        await server.serve([sock])
    finally:
        done.set()


async def _prepare_recall(memory: Memory) -> None:
    try:
        await anyio.to_thread.run_sync(memory.prepare_search)
    except Exception:  # recall indexes on demand instead; the daemon keeps running
        log.exception("preparing recall (the text index) failed")
    # What the start made (modules, the app, the layers' caches) lives as long as the
    # daemon: out of the collector's sight, a full collection walks only what was made
    # since, instead of pausing a recall for 35-45 ms (measured at 1M lines).
    gc.freeze()


async def index_stored_marks(memory: Memory) -> None:
    """Index the marks this daemon's writer stored within ``MARKS_LOOK`` seconds, recall or
    not, once the start's preparation is done (before, it is indexing them): with semantic
    recall on, that wakes the embedding worker for them, which would otherwise wait for a
    recall or its idle look, 30 s later."""
    seen = memory.store.commits
    while True:
        await anyio.sleep(MARKS_LOOK)
        if memory.prepared.is_set() and memory.store.commits != seen:
            seen = memory.store.commits  # (its own writes make the next look read the queue)
            try:
                await memory.index_stored_marks()
            except Exception:  # the store failed: the next look, or a recall, tries again
                log.exception("indexing the stored marks failed")


async def _watchdog(store: Store, interval: float) -> None:
    """Ping systemd while the event loop runs and the store can be written; stop pinging (so
    systemd restarts us) when the writer thread has died or the database file is gone."""
    while store.writer_alive and not store.lost:
        notify("WATCHDOG=1")
        await anyio.sleep(interval)
    log.error("the store cannot be written; no more watchdog pings")
