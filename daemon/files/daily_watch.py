"""Tells the daily log when a file under its directory changes, so that a recall looks for
files edited by hand only after something changed (:mod:`daemon.files.hand_edits`):
without the watch, every recall after a few seconds' pause paid a look at every file.

The watch covers the directory and its archive. Until it is set (the directory does not
exist yet) and after it ends (the directory was deleted or replaced, or the system refused
a watch), the daily log looks every few seconds as before. A directory made, deleted or
replaced while the daemon runs is found at the latest ``recheck`` (a directory made) or
``wake`` seconds later (one deleted or replaced while watched: the watch wakes that often
to look, and each wake costs the idle daemon a little CPU)."""

from __future__ import annotations

from pathlib import Path

import anyio
import structlog
from watchfiles import awatch

from daemon.files.daily import DailyLog
from daemon.files.watcher import RECHECK_SECONDS, identity

log = structlog.get_logger("cambium.watcher")

WAKE_SECONDS = 10.0
STEP_MS = 200


async def watch_daily(
    daily: DailyLog,
    stop: anyio.Event,
    *,
    recheck: float = RECHECK_SECONDS,
    wake: float = WAKE_SECONDS,
) -> None:
    """Keep ``daily`` told whether its directory is watched and when it changes, until
    ``stop`` is set."""
    told = False  # said once why the directory is not watched; quiet until that changes
    while not stop.is_set():
        held = identity(daily.directory) if daily.directory.is_dir() else None
        if held is not None:
            try:
                await _watch(daily, held, stop, wake)
                told = False
                continue
            except OSError as exc:  # e.g. the system's limit on watches
                if not told and not isinstance(exc, FileNotFoundError):  # (not: just gone)
                    log.warning(
                        "cannot watch the daily directory: looking for hand-edited files"
                        " every few seconds instead",
                        directory=str(daily.directory),
                        error=str(exc),
                    )
                    told = True
            finally:
                daily.hand_edits.watched(False)
        with anyio.move_on_after(recheck):
            await stop.wait()


async def _watch(daily: DailyLog, held: tuple[int, int], stop: anyio.Event, wake: float) -> None:
    """Watch the directory until ``stop`` is set or it is no longer the one ``held``."""
    first = True
    async for changes in awatch(
        daily.directory,
        stop_event=stop,
        recursive=True,
        # How often the watch's thread takes the interpreter's lock to look at ``stop`` (and
        # how long a change waits for the next): each look costs the idle daemon CPU.
        step=STEP_MS,
        watch_filter=None,  # (the default one skips names such as an editor's backups)
        rust_timeout=int(wake * 1000),
        yield_on_timeout=True,
    ):
        if first:  # the watch is surely set by its first wake-up (a change, or a timeout)
            daily.hand_edits.watched(True)
            log.info("watching the daily files", directory=str(daily.directory))
            first = False
        elif changes:
            daily.hand_edits.changed({Path(path) for _, path in changes})
        if identity(daily.directory) != held:
            return
