"""Free text finds marks by what they say and by their subject's words (a dotted subject
path is matched by prefix only), through the store's text index
(:mod:`daemon.store.text_index`); this module keeps the marks' rows current.

The table keeps the index honest by itself: triggers on ``memory_marks`` queue every mark
inserted or whose text changed (``text_pending``) and delete the rows of a changed or
deleted mark in the same transaction, so ``memory.forget`` leaves no row to find.
:meth:`MarkSearch.index` turns queued marks into rows (stemmed here, where the terms are
made), a chunk per transaction: resumable, and O(new marks). A search also ranks what is
still queued, in memory, so a mark is found from the moment it is stored, whoever asks
(the daemon, or a CLI reading the store while the daemon is down).

With semantic recall on (a dense ranker given), every observation is also embedded, when
the dense side first sees it (the next recall, or the daemon's start), and cached by
content hash beside the store, apart from the other layers' embeddings; the lexical and
dense rankings are fused as in the daily layer. The dense side follows the table as it did
before the index moved into the store: new rows by count and creation instant, forgotten
marks by their state; a forgotten mark's embedding is deleted with it, and the first look
after a start deletes any cached embedding no indexed text has.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from daemon.core.text_rows import MARKS
from daemon.search.fusion import DenseRanker
from daemon.search.index import row_of
from daemon.search.marks import MAX_HITS, MarkMeanings, has_terms, indexed_text
from daemon.search.text import Index, query_terms
from daemon.store import MarkText as Said
from daemon.store import Store, Tx

# How far back from the newest row already embedded an incremental read starts.
SLACK = timedelta(minutes=10)
# Marks turned into rows per transaction; and at most this many still queued are ranked
# in memory by a search (the daemon indexes the queue at each recall and at its start).
CHUNK = 500


class MarkSearch:
    """The marks' side of the text index, for every workspace (a search names its
    workspace). Thread-safe: recall runs in worker threads."""

    def __init__(self, dense: DenseRanker[str] | None = None) -> None:
        self._lock = threading.Lock()
        self._indexing = threading.Lock()  # one writer of the marks' rows per process
        self._meanings = None if dense is None else MarkMeanings(dense)
        self._newest: datetime | None = None
        self._forgotten: set[str] = set()  # erased by memory.forget: never embedded
        self._pruned = False  # whether the cache was cleared of what no mark says

    def index(self, store: Store) -> int:
        """Turn every queued mark into its row; how many marks were taken off the queue."""
        done = 0
        with self._indexing:
            while True:
                taken = store.write_sync(_index_queued)
                done += taken
                if taken < CHUNK:
                    return done

    def search(self, tx: Tx, workspace: str, about: str) -> list[str]:
        """Ids of the marks in ``workspace`` whose subject or observation holds a word of
        ``about`` (or, with a dense ranker, is close to it in meaning), most relevant
        first. A subject path finds nothing here (see
        :func:`daemon.search.marks.is_free_text`)."""
        if not has_terms(about):
            return []  # nothing to look for: no need to follow the table
        wanted = list(query_terms(about))
        rows = tx.text_index.candidates(MARKS, wanted, MAX_HITS, scope=workspace)
        found = [row.source for row in rows]
        found += [mark for mark in _queued_matches(tx, workspace, about) if mark not in found]
        if self._meanings is None:
            return found[:MAX_HITS]
        with self._lock:
            self._follow(tx, self._meanings)
            return self._meanings.fuse(workspace, about, found[:MAX_HITS])

    def follow(self, tx: Tx) -> None:
        """Bring the dense side up to date with the table now rather than at the next
        search (with a dense ranker)."""
        if self._meanings is not None:
            with self._lock:
                self._follow(tx, self._meanings)

    def embed(self) -> None:
        """Embed (with a dense ranker) the texts read since the last search, outside any
        transaction, so that the next search does not wait for it."""
        if self._meanings is not None:
            with self._lock:
                self._meanings.flush()

    def _follow(self, tx: Tx, meanings: MarkMeanings) -> None:
        for mark_id in tx.marks.forgotten_ids() - self._forgotten:
            meanings.erase(mark_id)
            self._forgotten.add(mark_id)
        self._read_new(tx, meanings)
        if not self._pruned:
            meanings.prune()  # every live text is known now
        self._pruned = True

    def _read_new(self, tx: Tx, meanings: MarkMeanings) -> None:
        count = tx.marks.count_all()
        if count == len(meanings.ids()):
            return
        if self._newest is not None:
            self._read(tx.marks.texts_created_since(self._newest - SLACK), meanings)
        if count == len(meanings.ids()):
            return
        # Rows stored with an old instant (or the first look): compare ids, read what is new.
        stored = tx.marks.all_ids()
        for gone in meanings.ids() - stored:
            meanings.drop(gone)
        self._read(tx.marks.texts_of(list(stored - meanings.ids())), meanings)

    def _read(self, found: list[Said], meanings: MarkMeanings) -> None:
        known = meanings.ids()
        for text in found:
            if text.id not in known:
                forgotten = text.id in self._forgotten
                meanings.add(text.id, text.workspace_id, None if forgotten else text.observation)
            if self._newest is None or text.created_at > self._newest:
                self._newest = text.created_at


def _index_queued(tx: Tx) -> int:
    """One chunk of the queue into rows; how many marks it held."""
    queued = tx.text_index.pending_marks(CHUNK)
    rows = [
        row_of(0, mark.observation, indexed_text(mark.subject, mark.observation))
        for mark in queued
        if not mark.forgotten and mark.workspace_id
    ]
    tx.text_index.indexed_marks(queued, rows)
    return len(queued)


def _queued_matches(tx: Tx, workspace: str, about: str) -> list[str]:
    """The queued marks of ``workspace`` that ``about`` finds, ranked in memory."""
    queued = [
        mark
        for mark in tx.text_index.pending_marks(CHUNK)
        if mark.workspace_id == workspace and not mark.forgotten
    ]
    if not queued:
        return []
    index: Index[str] = Index()
    for mark in queued:
        index.add(mark.id, indexed_text(mark.subject, mark.observation))
    return [match.key for match in index.search(about, MAX_HITS)]
