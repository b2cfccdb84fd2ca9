"""The stored vectors of the daily lines and the marks, and the rankers recall asks.

The rows in the store (``tx.dense``, migration 0010) are the vectors' truth: on SQLite in
the store's own file, on PostgreSQL in its tables, written in the store's transactions,
erased by its scrub. Recall searches a copy laid out for search, the memory-mapped int8
matrices of :class:`~daemon.search.vector_file.VectorFiles`, which :class:`StoredVectors`
keeps in step: every change is a store transaction (which bumps the store's generation)
followed by the same change to the file, committed under that generation, one change at a
time. A search waits only while the file's slots change, never for the store's transaction
or the file's fsync (the worker's writes would hold every recall for a durable commit),
except behind a change that erases: from its transaction on, no search may find what it
erased. A file whose generation differs from the store's (a crash between the two, a deleted
file) is repaired from the rows: what the store no longer has is zeroed, what the file
lacks is copied, page by page, while recall ranks with what is there.

A search by meaning finds vectors; the marks they are of are looked up in memory: the
daemon keeps every mark's vector's mark id and workspace (read at its start, then changed
with the file). Read from the store, the 200 a search finds cost 1-2 ms a recall, with a
cold cache up to 4.5, on the thread whose search runs beside recall's lexical work.

A process that may not write the store (the CLI, with the daemon down) maps the file
read-only, uses it only if it is current, and looks the marks found up in the store (for
one recall, reading every mark's place would cost more).
"""

from __future__ import annotations

import threading
import zlib
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from contextlib import nullcontext
from datetime import date
from functools import partial
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np
import structlog
from numpy.typing import NDArray

from daemon.core.vectors import DAILY, LIVE, MARKS, NewVector, StoredVector
from daemon.search.daily import LineKey
from daemon.search.semantic import Semantic
from daemon.search.vector_file import ARCHIVED_LINE, LIVE_LINE, MARK, Entry, Found, VectorFiles
from daemon.store import DenseRows, Store, Tx

log = structlog.get_logger("cambium.embedding")

K = TypeVar("K")
_Asked = tuple[str, int, date | None, str | None]  # a search: query, limit, since, scope

REPAIR_PAGE = 2000  # rows copied into the file per transaction while repairing
AHEAD = 8  # searches started ahead and not yet taken, at most, per ranker


def scope_code(workspace: str) -> int:
    """A workspace as the file's key for a mark: a 31-bit checksum of its name (the
    name itself is checked in the store for the marks found)."""
    return zlib.crc32(workspace.encode("utf-8")) & 0x7FFFFFFF


def _get(tx: Tx, ids: Sequence[int]) -> list[StoredVector]:
    return tx.dense.get(ids)


def entry(stored: StoredVector) -> Entry:
    place, vector = stored.place, stored.vector
    if place.layer == DAILY:
        kind = LIVE_LINE if place.state == LIVE else ARCHIVED_LINE
        key = date.fromisoformat(place.source).toordinal()
    else:
        kind, key = MARK, scope_code(place.scope)
    return Entry(stored.id, kind, key, place.part, vector.values, vector.scale)


class StoredVectors:
    """The store's vectors and their memory-mapped copy, kept in step. Thread-safe."""

    def __init__(
        self, store: Store, base: Path, model: str, dimension: int, *, writable: bool
    ) -> None:
        self.store = store
        self.model = model
        self._base = base
        self._dimension = dimension
        self._lock = threading.Lock()  # one change at a time
        self._searching = threading.RLock()  # held by a search, and while the slots change
        self._repairing = False
        self._file: VectorFiles | None = None  # the daemon's is opened by open()
        # The daemon's, from open() on: each mark's vector's (mark id, workspace).
        self._marks: dict[int, tuple[str, str]] | None = None
        self._writable = writable
        if not writable:
            opened = VectorFiles(base, model, dimension, writable=False)
            # Read-only: used only if it is what the store holds.
            self._file = opened if self._current(opened) else None

    @property
    def embedded(self) -> int:
        """Vectors in the file (all of them, once it is current)."""
        return 0 if self._file is None else self._file.live

    def _current(self, file: VectorFiles) -> bool:
        model, generation = self.store.read_sync(lambda tx: tx.dense.model_and_generation())
        return model == self.model and generation == file.generation

    # -- writing (the worker, forget) ----------------------------------------------------

    def open(self) -> None:
        """Open the daemon's file, make the store's vectors this model's (another model's
        are deleted) and read where each mark's vector belongs; from here on the file is
        searched, and changed with the store. Once only; quick (0.1-0.2 s at 100,000
        marks), but building the marks' map holds the interpreter throughout, so the daemon
        opens before it serves: beside recalls it stalled each of them 0.1-0.3 s."""
        with self._lock:
            if self._file is not None:
                return
            file = VectorFiles(self._base, self.model, self._dimension, writable=True)
            if self.store.write_sync(lambda tx: tx.dense.use_model(self.model)):
                file.clear()
            marks = self.store.read_sync(lambda tx: tx.dense.mark_places())
            with self._searching:
                self._file, self._marks = file, marks
            # (here, under the lock: a change before the repair must not mark it current)
            self._repairing = not self._current(file)

    def prepare(self, stopped: Callable[[], bool]) -> None:
        """:meth:`open`, then repair the file from the rows if it is not current; stops
        early if ``stopped``."""
        self.open()
        file = self._file
        if file is None or not self._repairing:
            return
        try:
            self._repair(file, stopped)
        finally:
            self._repairing = False

    def _repair(self, file: VectorFiles, stopped: Callable[[], bool]) -> None:
        with self._lock:
            stored = np.asarray(self.store.read_sync(lambda tx: tx.dense.ids()), dtype=np.int64)
            with self._searching:
                held = file.ids()
                file.remove(held[~np.isin(held, stored)].tolist())
            missing = stored[~np.isin(stored, held)].tolist()
        for start in range(0, len(missing), REPAIR_PAGE):
            if stopped():
                return  # the next start goes on: the header still says "not current"
            page = missing[start : start + REPAIR_PAGE]
            with self._lock:
                entries = [entry(row) for row in self.store.read_sync(partial(_get, ids=page))]
                with self._searching:
                    file.put(entries)
        with self._lock:
            file.commit(self.store.read_sync(lambda tx: tx.dense.model_and_generation())[1])
        if missing:
            log.info("vector file repaired from the store", copied=len(missing))

    def write(
        self, rows: Sequence[NewVector], drop: Callable[[DenseRows], list[int]] | None = None
    ) -> None:
        """Store ``rows`` (replacing the vectors at their places) and delete what ``drop``
        deletes, in one transaction, then the same in the file."""

        def job(dense: DenseRows) -> tuple[list[StoredVector], list[int]]:
            stored, replaced = dense.put(rows)
            return stored, replaced + (drop(dense) if drop is not None else [])

        self._change(job, erasing=drop is not None)

    def delete(self, drop: Callable[[DenseRows], list[int]]) -> int:
        """Delete what ``drop`` deletes, from the store and then from the file (zeroed on
        disk); how many vectors."""
        return len(self._change(lambda dense: ([], drop(dense)), erasing=True)[1])

    def _change(
        self, job: Callable[[DenseRows], tuple[list[StoredVector], list[int]]], *, erasing: bool
    ) -> tuple[list[StoredVector], list[int]]:
        def transaction(dense: DenseRows) -> tuple[list[StoredVector], list[int], int | None]:
            stored, deleted = job(dense)
            return stored, deleted, dense.changed() if stored or deleted else None

        if not self._writable:
            raise PermissionError("the stored vectors are only read here")
        with self._lock:
            # A change that erases keeps searches out from its transaction on: none may find
            # what it erased. Any other lets them go on with the file as it was until then.
            with self._searching if erasing else nullcontext():
                stored, deleted, generation = self.store.write_sync(
                    lambda tx: transaction(tx.dense)
                )
                file = self._file
                if generation is None or file is None:  # not opened yet: open() sees the change
                    return stored, deleted
                entries = [entry(row) for row in stored]
                with self._searching:  # (re-entered when erasing)
                    file.remove(deleted)
                    file.put(entries)
                    self._change_marks(stored, deleted)
            # While repairing, the header must go on saying "not current".
            file.commit(-1 if self._repairing else generation)
        return stored, deleted

    def _change_marks(self, stored: Sequence[StoredVector], deleted: Sequence[int]) -> None:
        marks = self._marks
        if marks is None:
            return
        for id_ in deleted:
            marks.pop(id_, None)
        for row in stored:
            if row.place.layer == MARKS:
                marks[row.id] = (row.place.source, row.place.scope)

    # -- searching -----------------------------------------------------------------------

    def nearest(
        self,
        query: NDArray[np.float32],
        limit: int,
        *,
        kinds: Sequence[int],
        floor: float,
        key: int | None = None,
        since: int | None = None,
    ) -> list[Found]:
        with self._searching:
            if self._file is None:
                return []
            file = self._file.of(kinds)
            return file.nearest(query, limit, kinds=kinds, floor=floor, key=key, since=since)

    def marks_of(self, ids: Sequence[int], scope: str | None) -> dict[int, str]:
        """The mark id of each of these vectors' marks (those the store holds, and of
        workspace ``scope`` when it is given)."""
        with self._searching:  # (after an erasing change, never what it erased)
            marks = self._marks
            if marks is not None:
                found = {}
                for id_ in ids:
                    place = marks.get(id_)
                    if place is not None and (scope is None or place[1] == scope):
                        found[id_] = place[0]
                return found
        return self.store.read_sync(lambda tx: tx.dense.mark_sources(ids, scope))

    def close(self) -> None:
        with self._lock, self._searching:
            if self._file is not None:
                self._file.close()


class _RankerAhead(ABC, Generic[K]):
    """A :class:`~daemon.search.fusion.DenseRanker` whose searches recall can start ahead.

    :meth:`search_ahead` runs the search in the query thread, behind the question's
    embedding, so that the vectors' scan (and, for the marks, the look-up of those found:
    3-5 ms at a million lines) runs on the other core while recall's lexical work runs; the
    next :meth:`nearest` with the same arguments takes its answer."""

    def __init__(self, vectors: StoredVectors, semantic: Semantic) -> None:
        self._vectors = vectors
        self._semantic = semantic
        self._lock = threading.Lock()
        self._ahead: OrderedDict[_Asked, Future[dict[K, float]]] = OrderedDict()

    def search_ahead(
        self, query: str, limit: int, *, since: date | None = None, scope: str | None = None
    ) -> None:
        asked = (query, limit, since, scope)
        with self._lock:
            if asked in self._ahead:
                return
            self._ahead[asked] = self._semantic.ahead(partial(self._nearest, *asked))
            while len(self._ahead) > AHEAD:  # (searches started for recalls that failed)
                self._ahead.popitem(last=False)

    def nearest(
        self, query: str, limit: int, *, since: date | None = None, scope: str | None = None
    ) -> dict[K, float]:
        with self._lock:
            started = self._ahead.pop((query, limit, since, scope), None)
        if started is not None:
            return started.result()
        return self._nearest(query, limit, since, scope)

    @abstractmethod
    def _nearest(
        self, query: str, limit: int, since: date | None, scope: str | None
    ) -> dict[K, float]:
        """The search itself, in whichever thread asks."""


class StoredLines(_RankerAhead[LineKey]):
    """The daily lines' :class:`~daemon.search.fusion.DenseRanker`."""

    def _nearest(
        self, query: str, limit: int, since: date | None, scope: str | None
    ) -> dict[LineKey, float]:
        if self._vectors.embedded == 0:
            return {}  # nothing to rank: the query is not embedded either
        found = self._vectors.nearest(
            self._semantic.embed_query(query),
            limit,
            kinds=(LIVE_LINE, ARCHIVED_LINE),
            floor=self._semantic.min_similarity,
            since=None if since is None else since.toordinal(),
        )
        return {
            (date.fromordinal(f.key), f.kind == ARCHIVED_LINE, f.part): f.similarity for f in found
        }


class StoredMarks(_RankerAhead[str]):
    """The marks' :class:`~daemon.search.fusion.DenseRanker` (``scope``: the workspace)."""

    def _nearest(
        self, query: str, limit: int, since: date | None, scope: str | None
    ) -> dict[str, float]:
        if self._vectors.embedded == 0:
            return {}
        found = self._vectors.nearest(
            self._semantic.embed_query(query),
            limit,
            kinds=(MARK,),
            floor=self._semantic.min_similarity,
            key=None if scope is None else scope_code(scope),
        )
        marks = self._vectors.marks_of([f.id for f in found], scope)
        return {marks[f.id]: f.similarity for f in found if f.id in marks}
