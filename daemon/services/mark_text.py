"""Free text finds marks by what they say (a dotted subject path is matched by prefix
only): a BM25 index (the same ranked matcher as the substrate, daily and compost layers)
over every mark's observation, kept in memory.

The index follows the table cheaply: a mark's text is fixed once written (a reinforcement
changes only its strength), so a new mark is a new row. Before each search one count tells
whether rows were added (or removed); if so, the rows stored since the last look are read
(by ``created_at``, with slack for instants that arrive late), and if the count still does
not agree (a signal emitted with an old ``emitted_at``, or the first look), the stored ids
are compared with the indexed ones and only the difference is read.
The state and strength of every hit are decided afterwards, by the ordinary marks query.

The one change to a written text is ``memory.forget``, which erases it: before each search
the forgotten marks are looked up (an indexed query on their state) and any still in the
index are dropped, so erased text neither stays in the daemon's memory nor finds a mark.
"""

from __future__ import annotations

import re
import threading
from datetime import datetime, timedelta

from daemon.files.text import Index, query_terms
from daemon.store import Tx
from daemon.store.marks import MarkText as Said

# How far back from the newest row already indexed an incremental read starts.
SLACK = timedelta(minutes=10)
# At most this many text hits go on to be scored by strength.
MAX_HITS = 200


# A dotted subject path (user.food.lunch) asks for a subtree, not for words: it is matched
# by prefix only. Anything else (a word, a phrase) is also looked up in the marks' text.
_SUBJECT_PATH = re.compile(r"^[^\s.]+(\.[^\s.]+)+$")


def is_free_text(about: str) -> bool:
    return _SUBJECT_PATH.match(about.strip()) is None


class MarkText:
    """The index, for every workspace (a search names its workspace). Thread-safe: recall
    runs in worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._index: Index[str] = Index()
        self._workspace: dict[str, str] = {}  # mark id -> workspace id
        self._newest: datetime | None = None
        self._forgotten: set[str] = set()  # erased by memory.forget: never indexed

    def search(self, tx: Tx, workspace: str, about: str) -> list[str]:
        """Ids of the marks in ``workspace`` whose observation holds a word of ``about``,
        most relevant first. A subject path finds nothing here (see :func:`is_free_text`)."""
        if not is_free_text(about) or not query_terms(about):
            return []  # nothing to look for: no need to follow the table
        with self._lock:
            self._follow(tx)
            hits = self._index.search(
                about, MAX_HITS, where=lambda mark_id: self._workspace[mark_id] == workspace
            )
        return [hit.key for hit in hits]

    def _follow(self, tx: Tx) -> None:
        for mark_id in tx.marks.forgotten_ids() - self._forgotten:
            self._index.remove(mark_id)
            self._forgotten.add(mark_id)
        count = tx.marks.count_all()
        if count == len(self._workspace):
            return
        if self._newest is not None:
            self._read(tx.marks.texts_created_since(self._newest - SLACK))
        if count == len(self._workspace):
            return
        # Rows stored with an old instant (or the first look): compare ids, read what is new.
        stored = tx.marks.all_ids()
        for gone in self._workspace.keys() - stored:
            self._index.remove(gone)
            del self._workspace[gone]
        self._read(tx.marks.texts_of(list(stored - self._workspace.keys())))

    def _read(self, found: list[Said]) -> None:
        for mark_id, workspace, observation, created_at in (
            (t.id, t.workspace_id, t.observation, t.created_at) for t in found
        ):
            if mark_id not in self._workspace:
                if mark_id not in self._forgotten:
                    self._index.add(mark_id, observation)
                self._workspace[mark_id] = workspace
            if self._newest is None or created_at > self._newest:
                self._newest = created_at
