"""Free text finds marks by what they say (a dotted subject path is matched by prefix
only): a BM25 index (the same ranked matcher as the substrate, daily and compost layers)
over every mark's observation, kept in memory (:class:`daemon.search.marks.MarkIndex`);
this module keeps it in step with the marks table.

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

With semantic recall on (a dense ranker given), every observation is also embedded, when
the index first sees it (the next recall, or the daemon's start), and cached by content
hash beside the store, apart from the other layers' embeddings; the lexical and dense
rankings are fused as in the daily layer. A forgotten mark's embedding is deleted with it,
and the first look after a start deletes any cached embedding no indexed text has (what a
forget left behind while the daemon was not running).
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from daemon.search.fusion import DenseRanker
from daemon.search.marks import MarkIndex, has_terms
from daemon.store import MarkText as Said
from daemon.store import Tx

# How far back from the newest row already indexed an incremental read starts.
SLACK = timedelta(minutes=10)


class MarkText:
    """The index, for every workspace (a search names its workspace). Thread-safe: recall
    runs in worker threads."""

    def __init__(self, dense: DenseRanker[str] | None = None) -> None:
        self._lock = threading.Lock()
        self._index = MarkIndex(dense)
        self._newest: datetime | None = None
        self._forgotten: set[str] = set()  # erased by memory.forget: never indexed
        self._pruned = False  # whether the cache was cleared of what no mark says

    def search(self, tx: Tx, workspace: str, about: str) -> list[str]:
        """Ids of the marks in ``workspace`` whose observation holds a word of ``about``
        (or, with a dense ranker, is close to it in meaning), most relevant first. A
        subject path finds nothing here (see :func:`daemon.search.marks.is_free_text`)."""
        if not has_terms(about):
            return []  # nothing to look for: no need to follow the table
        with self._lock:
            self._follow(tx)
            return self._index.search(workspace, about)

    def follow(self, tx: Tx) -> None:
        """Bring the index up to date with the table now rather than at the next search."""
        with self._lock:
            self._follow(tx)

    def embed(self) -> None:
        """Embed (with a dense ranker) the texts read since the last search, outside any
        transaction, so that the next search does not wait for it."""
        with self._lock:
            self._index.flush()

    def _follow(self, tx: Tx) -> None:
        for mark_id in tx.marks.forgotten_ids() - self._forgotten:
            self._index.erase(mark_id)
            self._forgotten.add(mark_id)
        self._read_new(tx)
        if not self._pruned:
            self._index.prune()  # every live text is indexed now
        self._pruned = True

    def _read_new(self, tx: Tx) -> None:
        count = tx.marks.count_all()
        if count == len(self._index.ids()):
            return
        if self._newest is not None:
            self._read(tx.marks.texts_created_since(self._newest - SLACK))
        if count == len(self._index.ids()):
            return
        # Rows stored with an old instant (or the first look): compare ids, read what is new.
        stored = tx.marks.all_ids()
        for gone in self._index.ids() - stored:
            self._index.drop(gone)
        self._read(tx.marks.texts_of(list(stored - self._index.ids())))

    def _read(self, found: list[Said]) -> None:
        known = self._index.ids()
        for mark_id, workspace, observation, created_at in (
            (t.id, t.workspace_id, t.observation, t.created_at) for t in found
        ):
            if mark_id not in known:
                forgotten = mark_id in self._forgotten
                self._index.add(mark_id, workspace, None if forgotten else observation)
            if self._newest is None or created_at > self._newest:
                self._newest = created_at
