"""Tells the daily log when a file under its directory changes, so that a recall looks for
files edited by hand only after something changed (:mod:`daemon.files.hand_edits`):
without the watch, every recall after a few seconds' pause paid a look at every file.

The watch covers the directory and its archive. Until it is set (the directory does not
exist yet) and after it ends (the directory was deleted or replaced, or the system refused
a watch), the daily log looks every few seconds as before. A directory made, deleted or
replaced while the daemon runs is found at the latest ``recheck`` seconds later."""

from __future__ import annotations

from pathlib import Path

import anyio
import structlog
from watchfiles import awatch

from daemon.files.daily import DailyLog
from daemon.files.watcher import RECHECK_SECONDS, identity

log = structlog.get_logger("cambium.watcher")


async def watch_daily(
    daily: DailyLog, stop: anyio.Event, *, recheck: float = RECHECK_SECONDS
) -> None:
    """Keep ``daily`` told whether its directory is watched and when it changes, until
    ``stop`` is set."""
    told = False  # said once why the directory is not watched; quiet until that changes
    while not stop.is_set():
        held = identity(daily.directory) if daily.directory.is_dir() else None
        if held is not None:
            try:
                await _watch(daily, held, stop, recheck)
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


async def _watch(daily: DailyLog, held: tuple[int, int], stop: anyio.Event, recheck: float) -> None:
    """Watch the directory until ``stop`` is set or it is no longer the one ``held``."""
    first = True
    async for changes in awatch(
        daily.directory,
        stop_event=stop,
        recursive=True,
        watch_filter=None,  # (the default one skips names such as an editor's backups)
        rust_timeout=int(recheck * 1000),
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
