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

With semantic recall on (a dense ranker given: the marks' stored vectors), the lexical and
dense rankings are fused as in the daily layer. The daemon's embedding worker embeds the
marks' texts (:mod:`daemon.services.embedding_worker`); a mark it has not reached yet is
found by its words alone. A forget deletes the forgotten marks' vectors
(:meth:`MarkSearch.erase_outdated`) before the store is scrubbed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from daemon.core.text_rows import MARKS
from daemon.search.fusion import DenseRanker
from daemon.search.index import row_of, selective
from daemon.search.marks import CHOOSING, MAX_HITS, fused, has_terms, indexed_text
from daemon.search.text import Index, query_terms
from daemon.store import Store, Tx

# Marks turned into rows per transaction; and at most this many still queued are ranked
# in memory by a search (the daemon indexes the queue at each recall and at its start).
CHUNK = 500


class MarkSearch:
    """The marks' side of the text index, for every workspace (a search names its
    workspace). Thread-safe: recall runs in worker threads."""

    def __init__(
        self,
        dense: DenseRanker[str] | None = None,
        erase_outdated: Callable[[], int] | None = None,
    ) -> None:
        self._indexing = threading.Lock()  # one writer of the marks' rows per process
        self._dense = dense
        self._erase_outdated = erase_outdated

    def index(self, store: Store, between: Callable[[int, int], None] | None = None) -> int:
        """Turn every queued mark into its row; how many marks were taken off the queue.
        ``between`` is told between two chunks how many are done, of how many (those queued
        when the second chunk began); it may raise to stop there."""
        done = total = 0
        with self._indexing:
            while True:
                taken = store.write_sync(_index_queued)
                done += taken
                if taken < CHUNK:
                    return done
                if between is not None:
                    total = total or done + store.read_sync(_count_queued)
                    between(done, total)

    async def index_in_writer(self, store: Store) -> int:
        """:meth:`index`, as the bus's writer's own transactions (no write lock contended
        for beside it), if anything is queued; how many marks were taken off the queue."""
        done = 0
        while await store.read(_count_queued):
            taken = await store.write(_index_queued, durable=False)  # (rebuilt if lost)
            done += taken
            if taken < CHUNK:
                break
        return done

    def search(self, tx: Tx, workspace: str, about: str) -> list[str]:
        """Ids of the marks in ``workspace`` whose subject or observation holds a word of
        ``about`` (or, with a dense ranker, is close to it in meaning), most relevant
        first. A subject path finds nothing here (see
        :func:`daemon.search.marks.is_free_text`)."""
        if not has_terms(about):
            return []  # nothing to look for
        wanted = list(query_terms(about))
        choosing = selective(wanted, tx.text_index.statistics(MARKS, wanted), CHOOSING)
        found = tx.text_index.candidate_sources(MARKS, choosing, MAX_HITS, scope=workspace)
        found += [mark for mark in _queued_matches(tx, workspace, about) if mark not in found]
        if self._dense is None:
            return found[:MAX_HITS]
        return fused(self._dense, workspace, about, found[:MAX_HITS])

    def erase_outdated(self) -> int:
        """Delete the vectors of marks whose text is gone or changed (after a forget: the
        forgotten marks'); how many."""
        return 0 if self._erase_outdated is None else self._erase_outdated()


def _index_queued(tx: Tx) -> int:
    """One chunk of the queue into rows; how many marks it held."""
    queued = tx.text_index.pending_marks(CHUNK, claim=True)
    rows = [
        row_of(0, mark.observation, indexed_text(mark.subject, mark.observation))
        for mark in queued
        if not mark.forgotten and mark.workspace_id
    ]
    tx.text_index.indexed_marks(queued, rows)
    return len(queued)


def _count_queued(tx: Tx) -> int:
    return tx.text_index.count_pending()


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
