"""Keeps the substrate cache fresh: watchfiles on the substrate's directories and files.

A single-file entry is watched itself, not through its directory: a directory's watch wakes
at every write to any file in it, and the store's database and its write-ahead log may sit
beside the file (a daemon with ``SOUL.md`` beside them spent up to a tenth more CPU per
stored signal). A watch on a file ends with the file: an editor saves by writing a
temporary file and renaming it over the original, which deletes the watched one. So a
watched file reported deleted is watched again at once, and read again once its new watch
is set (what was written between the two is not missed); so is one found to be another
file than the one watched (at the latest ``recheck`` seconds later).

Which entries exist can change while the daemon runs: a substrate directory or file created
after the start must be watched too. So the watch wakes up every ``recheck`` seconds even
when nothing changed, and starts over on the new set of entries when it differs (the cache
is dropped then, so the new entry's files are read).

When the system refuses a watch (its limit on watches or on watchers, say), the daemon goes
on: the cache is dropped every ``recheck`` seconds instead (so the next recall looks at
every file's size and mtime), and the watch is tried again.
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


async def watch_substrate(
    substrate: Substrate,
    stop: anyio.Event,
    *,
    on_change: Callable[[set[Path]], None] | None = None,
    recheck: float = RECHECK_SECONDS,
) -> None:
    """Invalidate cached substrate files as they change, until ``stop`` is set."""
    roots = substrate.watch_roots()
    told = False  # said once that there is nothing to watch; quiet until that changes
    refused = False  # said once that the system refused a watch; quiet until one is set
    lost: set[Path] = set()  # watched files deleted (or replaced): to read again once watched
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
            if not lost and not refused:  # (a file saved by rename is watched again quietly)
                log.info("watching substrate", roots=[str(r) for r in roots])
            try:
                lost = await _watch(substrate, roots, stop, on_change, recheck, lost)
                refused = False
            except OSError as exc:  # e.g. the system's limit on watches: the daemon goes on
                if not refused and not isinstance(exc, FileNotFoundError):  # (not: just gone)
                    log.warning(
                        "cannot watch the substrate: it is read again every few seconds instead",
                        roots=[str(r) for r in roots],
                        error=str(exc),
                    )
                    refused = True
                lost = set()
                substrate.invalidate()  # the next recall looks at every file's size and mtime
                with anyio.move_on_after(recheck):
                    await stop.wait()
        found = substrate.watch_roots()
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
    lost: set[Path],
) -> set[Path]:
    """Watch ``roots`` until ``stop`` is set, the set of existing roots changes, or a
    watched file is deleted: then the files deleted, to be watched again. ``lost``: files
    a watch before this lost, read again at this watch's first wake-up (changes, or
    ``recheck`` seconds), when it is surely set."""
    files = {root: identity(root) for root in roots if not root.is_dir()}
    async for changes in awatch(
        *roots,
        stop_event=stop,
        recursive=False,
        step=30,
        rust_timeout=int(recheck * 1000),
        yield_on_timeout=True,
    ):
        changed = {Path(path) for _, path in changes if substrate.is_substrate_path(Path(path))}
        if lost:
            changed |= lost
            lost = set()
        for path in changed:
            substrate.invalidate(path)
        if changed:
            kinds = sorted({change.name for change, _ in changes if isinstance(change, Change)})
            log.info("substrate changed", files=[str(p) for p in changed], changes=kinds)
            if on_change is not None:
                on_change(changed)
        # Deleted, or another file now (a rename over it while something kept the watched
        # one open reports no deletion until that closes it).
        deleted = {Path(path) for change, path in changes if change == Change.deleted}
        gone = {path for path, held in files.items() if path in deleted or identity(path) != held}
        if gone:
            return gone
        if substrate.watch_roots() != roots:
            return set()
    return set()


def identity(path: Path) -> tuple[int, int] | None:
    """Which file (or directory) is at ``path`` now: its device and inode; None if none."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino
