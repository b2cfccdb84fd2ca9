"""Keeps the substrate cache fresh: watchfiles on the substrate's directories.

Single-file entries are watched through their parent directory, because editors save by
writing a temporary file and renaming it over the original, which a watch on the file
itself would lose track of.

Which directories exist can change while the daemon runs: a substrate directory created
after the start must be watched too. So the watch wakes up every ``recheck`` seconds even
when nothing changed, and starts over on the new set of directories when it differs (the
cache is dropped then, so the new directory's files are read).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import structlog
from watchfiles import Change, awatch

from daemon.files.substrate import Substrate

log = structlog.get_logger("cambium.watcher")

RECHECK_SECONDS = 2.0


def _existing_roots(substrate: Substrate) -> list[Path]:
    return [root for root in substrate.watch_roots() if root.is_dir()]


async def watch_substrate(
    substrate: Substrate,
    stop: anyio.Event,
    *,
    on_change: Callable[[set[Path]], None] | None = None,
    recheck: float = RECHECK_SECONDS,
) -> None:
    """Invalidate cached substrate files as they change, until ``stop`` is set."""
    roots = _existing_roots(substrate)
    told = False  # said once that there is nothing to watch; quiet until that changes
    while not stop.is_set():
        if not roots:
            if not told:
                # A warning when configured directories are missing; none configured is fine.
                entries = [str(entry) for entry in substrate.entries]
                say = log.warning if entries else log.info
                say("no substrate directory to watch yet", entries=entries)
                told = True
            with anyio.move_on_after(recheck):
                await stop.wait()
        else:
            log.info("watching substrate", roots=[str(r) for r in roots])
            await _watch(substrate, roots, stop, on_change, recheck)
        found = _existing_roots(substrate)
        if found != roots:
            roots = found
            told = False
            substrate.invalidate()
            if on_change is not None:
                on_change(set(roots))


async def _watch(
    substrate: Substrate,
    roots: list[Path],
    stop: anyio.Event,
    on_change: Callable[[set[Path]], None] | None,
    recheck: float,
) -> None:
    """Watch ``roots`` until ``stop`` is set or the set of existing roots changes."""
    async for changes in awatch(
        *roots,
        stop_event=stop,
        recursive=False,
        step=30,
        rust_timeout=int(recheck * 1000),
        yield_on_timeout=True,
    ):
        changed = {Path(path) for _, path in changes if substrate.is_substrate_path(Path(path))}
        for path in changed:
            substrate.invalidate(path)
        if changed:
            kinds = sorted({change.name for change, _ in changes if isinstance(change, Change)})
            log.info("substrate changed", files=[str(p) for p in changed], changes=kinds)
            if on_change is not None:
                on_change(changed)
        if _existing_roots(substrate) != roots:
            return
