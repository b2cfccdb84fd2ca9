"""A lock taken in turn: first come, first served.

``threading.Lock`` is not fair: a thread that releases it and asks again at once (the index's
upkeep, file after file or transaction after transaction for a minute) usually gets it back
before a thread that was waiting, which can then wait for the whole run: a note waited 30 s
for the daily files' lock behind the start's look at three years of them. On SQLite the
wait was worse still without a lock in the process: the busy handler looks again only every
25-100 ms, so a note's index write waited 4.4 s behind the start's indexing of marks.
"""

from __future__ import annotations

import threading
from collections import deque
from types import TracebackType


class InTurn:
    """A non-reentrant lock granted in the order it was asked for."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._asking: deque[object] = deque()

    def acquire(self, blocking: bool = True) -> bool:
        """Wait for the turn (without ``blocking``, only take a free lock); whether taken."""
        ticket = object()
        with self._changed:
            if not blocking and self._asking:
                return False
            self._asking.append(ticket)
            self._changed.wait_for(lambda: self._asking[0] is ticket)
        return True

    def release(self) -> None:
        with self._changed:
            self._asking.popleft()
            self._changed.notify_all()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
