"""The background worker that embeds what recall ranks by meaning: the marks' texts, the
daily lines and the substrate's lines. Recall never waits for it; until a text is embedded
it is ranked lexically, and :meth:`EmbeddingWorker.coverage` says how much is.

One thread, bounded: it reads a page of work at a time (``[recall] embed_batch`` lines or
marks), embeds it (each model call within ``[recall] embed_memory_mb``) and stores the page
in one transaction, so that a SIGKILL loses at most the page in flight and the next start
resumes where the store says it was: a vector already stored under a text's hash is never
computed again (a line that moved, by a consolidation's claim, say, keeps its vector). The
daily files are taken newest day first, since recall asks about recent days most; a file
is done when its lines' vectors are stored, recorded by the text index's signatures of the
files (so a start checks what changed without reading a file). :meth:`EmbeddingWorker.stop`
interrupts the model mid-batch: the daemon stops within seconds whatever it is doing.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from datetime import date
from functools import partial
from typing import Any, TypeVar

import numpy as np
import structlog

from daemon.core.text_rows import DAILY as TEXT_DAILY
from daemon.core.text_rows import LIVE as TEXT_LIVE
from daemon.core.vectors import (
    ARCHIVED,
    DAILY,
    LIVE,
    MARKS,
    Coverage,
    MarkToEmbed,
    NewVector,
    Place,
    Vector,
)
from daemon.files.daily import DailyLog
from daemon.search.embedding import Interrupted
from daemon.search.fusion import document_texts, line_meanings, meaning_hash
from daemon.search.semantic import DenseIndex, Semantic, mean_meaning, release_memory
from daemon.search.vector_file import quantize
from daemon.services.dense_store import StoredVectors
from daemon.services.mark_search import MarkSearch
from daemon.store import DenseRows, Tx

log = structlog.get_logger("cambium.embedding")

T = TypeVar("T")
IDLE_SECONDS = 30.0  # with nothing to do, look again this often (a change wakes it sooner)
RATE_WINDOW = 60.0  # lines per second are measured over this many seconds
RETRY_SECONDS = 30.0  # after a failed pass (a store that cannot be written, say)
# Looking for marks whose text changed since their vector was stored reads every mark's
# vector (96 ms at 100,000 marks), and so does looking for marks to embed among them all;
# a stored mark wakes a pass: with 100,000 marks embedded, a signal a second kept the
# worker at 0.5-0.56 s of CPU a second. A mark's text changes only when it is forgotten,
# which deletes its vector at once (MarkSearch.erase_outdated); a new mark's text row is
# numbered after every row there is (on SQLite, after a forget deleted the last rows, the
# next take their numbers again: a forget has the next pass look at every mark). So a pass
# reads only the rows written since the last pass began, and every mark is looked at by
# the first pass and then at most this often (which also finds a row that a concurrent
# transaction on PostgreSQL committed behind a later one).
SWEEP_EVERY = 300.0
# A document: where its vector goes, the texts it means, and a mark's text row's digest.
Document = tuple[Place, tuple[str, ...], int]


def document_hashes(lines: Sequence[str]) -> list[bytes]:
    """The hash each line of a daily file is embedded under (see :func:`line_meanings`)."""
    return [meaning_hash(document_texts(meaning)) for meaning in line_meanings(lines)]


def _documents(tx: Tx) -> tuple[int, int]:
    """The last text row written, and the documents the text index holds with it."""
    return tx.dense.last_text_row(), tx.dense.documents()


def _marks_to_embed(tx: Tx, limit: int, after: str) -> list[MarkToEmbed]:
    return tx.dense.marks_to_embed(limit, after)


def _marks_written_since(tx: Tx, limit: int, since: int) -> list[MarkToEmbed]:
    return tx.dense.marks_written_since(limit, since)


def _drop_file(dense: DenseRows, source: str, state: str) -> list[int]:
    return dense.drop_group(DAILY, source, state)


def in_pages(items: Sequence[T], size: int) -> list[Sequence[T]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


class EmbeddingWorker:
    """Embeds in a thread of its own (:meth:`start`, :meth:`stop`), or a pass at a time in
    the caller's (:meth:`run_once`: tests, benchmarks)."""

    def __init__(
        self,
        vectors: StoredVectors,
        semantic: Semantic,
        daily: DailyLog,
        mark_search: MarkSearch,
        substrate: DenseIndex[Any] | None = None,
        *,
        batch: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.vectors = vectors
        self._store = vectors.store
        self._semantic = semantic
        self._daily = daily
        self._mark_search = mark_search
        self._substrate = substrate
        self._batch = batch
        self._clock = clock
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._total: int | None = None  # documents in the text index, at the last count
        self._counted_after = 0  # the last text row written before that count
        self._swept: float | None = None  # when a pass last looked at every mark (the clock's)
        self._marks_seen = 0  # the last text row written when the last whole pass began
        self._sweep_wanted = threading.Event()
        self._done: deque[tuple[float, int]] = deque()  # (when, documents embedded)
        self.embedded_by_model = 0  # documents whose vector the model computed, ever
        daily.on_change(self.wake)

    # -- the thread ----------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cambium-embedding", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Something changed: look now rather than at the next idle timeout."""
        self._wake.set()

    def stop(self, timeout: float) -> bool:
        """Stop the thread, interrupting the model mid-batch; whether it ended in time."""
        self._stop.set()
        self._wake.set()
        self._semantic.embedder.interrupt()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def forgotten(self) -> None:
        """Marks were forgotten (their vectors deleted): the next pass looks at every mark,
        since new marks' text rows may take the forgotten ones' numbers."""
        self._sweep_wanted.set()
        self.wake()

    def stopped(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        try:
            self.vectors.prepare(self.stopped)
            while not self.stopped():
                try:
                    worked = self.run_once()
                except Interrupted:
                    return
                except Exception:  # the next pass tries again; recall goes on lexically
                    log.exception("embedding failed; trying again later")
                    self._wake.wait(RETRY_SECONDS)
                    continue
                # A pass embeds all it found; it runs again at once only if woken meanwhile.
                if not (worked and self._wake.is_set()):
                    self._wake.wait(IDLE_SECONDS)
                self._wake.clear()
        except Interrupted:
            return

    # -- progress ------------------------------------------------------------------------

    def coverage(self) -> Coverage:
        """How many documents (daily lines, marks, substrate lines) are embedded, of how
        many, and at what rate lately."""
        if self._total is None:
            self._count()
        total = (self._total or 0) + self._substrate_total()
        embedded = self.vectors.embedded + (len(self._substrate) if self._substrate else 0)
        now = self._clock()
        while self._done and self._done[0][0] < now - RATE_WINDOW:
            self._done.popleft()
        rate = sum(count for _, count in self._done) / RATE_WINDOW
        return Coverage(min(embedded, total), total, round(rate, 1))

    def _substrate_total(self) -> int:
        return 0 if self._substrate is None else len(self._substrate) + self._substrate.pending

    def _count(self) -> None:
        self._counted_after, self._total = self._store.read_sync(_documents)

    # -- a pass --------------------------------------------------------------------------

    def run_once(self) -> bool:
        """Embed everything that is not embedded yet (until stopped); whether anything was."""
        if self._store.writer_alive:
            self._mark_search.index(self._store)
        self._count()  # (every row written from here on is numbered after _counted_after)
        worked = self._marks()
        worked = self._daily_files() or worked
        worked = self._substrate_lines() or worked
        self._count()  # (rows written meanwhile)
        return worked

    def _marks(self) -> bool:
        """Embed the marks that have no vector: all of them at a look at every mark, else
        those whose text rows were written since the last pass began (the pass's count just
        read the last row written as this one began)."""
        last = self._counted_after
        now = self._clock()
        worked = sweep = False
        if self._swept is None or now - self._swept >= SWEEP_EVERY:
            worked = self.vectors.delete(lambda dense: dense.outdated_marks()) > 0
            self._swept, sweep = now, True
        if self._sweep_wanted.is_set():
            self._sweep_wanted.clear()
            sweep = True
        # A look at every mark goes by their ids (through the index on the text's layer);
        # the passes between, along the rows written since the last pass began.
        after, since = "", self._marks_seen
        while not self.stopped():
            if sweep:
                todo = self._store.read_sync(
                    partial(_marks_to_embed, limit=self._batch, after=after)
                )
            else:
                todo = self._store.read_sync(
                    partial(_marks_written_since, limit=self._batch, since=since)
                )
            if todo:
                after, since = todo[-1].id, todo[-1].row
                docs = [
                    (
                        Place(MARKS, m.id, scope=m.workspace),
                        document_texts((m.observation,)),
                        m.digest,
                    )
                    for m in todo
                ]
                self._embed(docs)
                worked = True
            if len(todo) < self._batch:  # none was left after these
                self._marks_seen = last
                break
        return worked

    def _daily_files(self) -> bool:
        wanted = self._fingerprints()
        done = self._store.read_sync(lambda tx: tx.dense.fingerprints(DAILY))
        # Newest day first; a day's archive before its live file, whose lines a claim
        # moved there (their vectors are found by hash).
        stale = sorted(
            (group for group in wanted if done.get(group) != wanted[group]),
            key=lambda group: (group[0], group[1] == ARCHIVED),
            reverse=True,
        )
        for day, state in stale:
            if self.stopped():
                return True
            self._daily_file(date.fromisoformat(day), state, wanted[(day, state)])
        gone = [group for group in done if group not in wanted]
        for day, state in gone:
            self.vectors.delete(partial(_drop_file, source=day, state=state))
        return bool(stale or gone)

    def _fingerprints(self) -> dict[tuple[str, str], str]:
        """What each daily file's vectors must be of: the text index's signatures of the
        file (a day's archive and its claim together)."""
        signatures = self._store.read_sync(lambda tx: tx.text_index.signatures(TEXT_DAILY))
        parts: dict[tuple[str, str], list[str]] = {}
        for (day, state), signature in signatures.items():
            group = (day, LIVE if state == TEXT_LIVE else ARCHIVED)
            parts.setdefault(group, []).append(f"{state}:{signature.sha256}")
        return {
            group: hashlib.sha256("|".join(sorted(held)).encode()).hexdigest()
            for group, held in parts.items()
        }

    def _daily_file(self, day: date, state: str, fingerprint: str) -> None:
        # The file is indexed (its signature led here): count it in the total, which a count
        # taken while it was being indexed left short ("8 of 8 embedded" with 392 to go).
        self._count()
        source = day.isoformat()
        # Recorded as begun: a file whose vectors are partly stored is known, whatever
        # happens to it before it is done.
        self._store.write_sync(lambda tx: tx.dense.begun(DAILY, source, state))
        lines = self._daily.numbered_lines(day, state == ARCHIVED)
        held = self._store.read_sync(lambda tx: tx.dense.at(DAILY, source, state))
        docs: list[Document] = []
        for number, meaning in enumerate(line_meanings(lines), start=1):
            texts = document_texts(meaning)
            if held.get(number, (0, b""))[1] != meaning_hash(texts):
                docs.append((Place(DAILY, source, state, number), texts, 0))
        for page in in_pages(docs, self._batch):
            if self.stopped():
                return
            self._embed(page)

        def finish(dense: DenseRows) -> list[int]:
            dropped = dense.drop_group(DAILY, source, state, from_part=len(lines) + 1)
            dense.done(DAILY, source, state, fingerprint)
            return dropped

        self.vectors.delete(finish)

    def _substrate_lines(self) -> bool:
        worked = False
        while self._substrate is not None and self._substrate.pending and not self.stopped():
            done = self._substrate.flush(self._batch, interruptible=True)
            self._done.append((self._clock(), done))
            worked = True
        return worked

    def _embed(self, docs: Sequence[Document]) -> None:
        """Store a vector for each document: one stored under its hash already, else the
        mean of its texts' embeddings (a document without text gets a zero vector, which
        nothing is similar to)."""
        hashes = [meaning_hash(texts) for _, texts, _ in docs]
        known = self._store.read_sync(lambda tx: tx.dense.by_hash(hashes))
        fresh = {
            digest for (_, held, _), digest in zip(docs, hashes, strict=True) if digest not in known
        }
        texts = list(
            dict.fromkeys(
                text
                for (_, held, _), digest in zip(docs, hashes, strict=True)
                if digest in fresh
                for text in held
            )
        )
        embedded = {}
        if texts:
            vectors = self._semantic.embedder.embed(texts, interruptible=True)
            embedded = dict(zip(texts, vectors, strict=True))
            release_memory()  # the batch's activations: a worker that waits holds none
        rows = []
        for (place, held, digest), hashed in zip(docs, hashes, strict=True):
            vector = known.get(hashed)
            if vector is None:
                values, scale = quantize(
                    mean_meaning(np.stack([embedded[t] for t in held]))
                    if held
                    else np.zeros(self._semantic.embedder.dimension, dtype=np.float32)
                )
                vector = Vector(values.tobytes(), scale)
                known[hashed] = vector
            rows.append(NewVector(place, hashed, vector, digest))
        self.vectors.write(rows)
        self.embedded_by_model += len(fresh)
        self._done.append((self._clock(), len(docs)))

    # -- forgetting ----------------------------------------------------------------------

    def forget_lines(self, day: date, before: Sequence[str], numbers: Collection[int]) -> None:
        """Archived lines of ``day`` were redacted (``memory.forget``): delete every vector
        of what they and their neighbours meant (``before``: the day's archived lines
        before), wherever it is stored, and the day's vectors that its files no longer
        hold; the day is embedded again as it is now."""
        old = document_hashes(before)
        forgotten = {
            old[n - 1 + step] for n in numbers for step in (-1, 0, 1) if 1 <= n + step <= len(old)
        }
        current = {
            digest
            for archived in (False, True)
            for digest in document_hashes(self._daily.numbered_lines(day, archived))
        }
        self.vectors.delete(
            lambda dense: (
                dense.delete_hashes(forgotten - current)
                + dense.delete_day(DAILY, day.isoformat(), keep=current - forgotten)
            )
        )
        self.wake()
