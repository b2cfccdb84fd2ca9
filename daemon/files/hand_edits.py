"""When a recall looks for daily files edited by hand.

A look stats every daily file and reads the index's signatures of them (11 ms of CPU in
three years of notes, most of a warm recall's cost again). What the daemon writes, it
indexes as it writes; only a person's edits need a look. So a look is taken at most every
``look_every`` seconds, and while the directory is watched
(:func:`daemon.files.daily_watch.watch_daily`) only after the watch saw a file change that
the daemon's own writes do not explain.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection
from pathlib import Path

from daemon.core.text_rows import Signature


class HandEdits:
    """The schedule of one daily log's looks. Told from the event loop (the watch) and
    asked from recall's threads: each attribute is replaced whole."""

    def __init__(
        self, look_every: float = 0.0, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._look_every = look_every
        self._monotonic = monotonic
        self._next_look = -math.inf
        self._watched = False
        self._changed = True
        # Each file as it was last indexed after this process wrote it: (size, mtime).
        self._indexed: dict[str, tuple[int, int]] = {}

    def take_look(self) -> bool:
        """Whether a look is due now; if so, it counts as taken (what changes while it
        runs calls for another)."""
        if self._monotonic() < self._next_look or (self._watched and not self._changed):
            return False
        self._changed = False
        self._next_look = self._monotonic() + self._look_every
        return True

    def look_again(self) -> None:
        """The look taken could not be made: the next search takes it."""
        self._changed = True
        self._next_look = -math.inf

    def indexed(self, path: Path, signature: Signature | None) -> None:
        """This process indexed the file at ``path`` as ``signature`` (None: it is gone)."""
        if signature is None:
            self._indexed.pop(str(path), None)
        else:
            self._indexed[str(path)] = (signature.size, signature.mtime_ns)

    def watched(self, watched: bool) -> None:
        """Told by the directory's watch: it is set (and sees every change from now on), or
        it ended. A watch just set may have missed what changed before it: a look is due."""
        self._changed = True
        self._watched = watched

    def changed(self, paths: Collection[Path]) -> None:
        """Told by the directory's watch: these files (or directories) under it changed. A
        file left as this process indexed it after writing it calls for no look."""
        for path in paths:
            try:
                info = path.stat(follow_symlinks=False)
            except OSError:
                info = None
            if info is None or self._indexed.get(str(path)) != (info.st_size, info.st_mtime_ns):
                self._changed = True
                return
