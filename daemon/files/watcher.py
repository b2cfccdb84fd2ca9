"""Keeps the substrate cache fresh: watchfiles on the substrate's directories.

Single-file entries are watched through their parent directory, because editors save by
writing a temporary file and renaming it over the original, which a watch on the file
itself would lose track of.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import structlog
from watchfiles import Change, awatch

from daemon.files.substrate import Substrate

log = structlog.get_logger("cambium.watcher")


async def watch_substrate(
    substrate: Substrate,
    stop: anyio.Event,
    *,
    on_change: Callable[[set[Path]], None] | None = None,
) -> None:
    """Invalidate cached substrate files as they change, until ``stop`` is set."""
    roots = [root for root in substrate.watch_roots() if root.is_dir()]
    if not roots:
        log.info("no substrate directory to watch")
        await stop.wait()
        return
    log.info("watching substrate", roots=[str(r) for r in roots])
    async for changes in awatch(*roots, stop_event=stop, recursive=False, step=30):
        changed = {Path(path) for _, path in changes if substrate.is_substrate_path(Path(path))}
        for path in changed:
            substrate.invalidate(path)
        if changed:
            kinds = sorted({change.name for change, _ in changes if isinstance(change, Change)})
            log.info("substrate changed", files=[str(p) for p in changed], changes=kinds)
            if on_change is not None:
                on_change(changed)
