"""Hybrid recall's parts, built from ``[recall]`` when ``semantic = true`` (the ``semantic``
extra): the model, the stored vectors of the daily lines and marks with their rankers, the
substrate's dense index, and in the daemon the worker that embeds them all.

Imported only when semantic recall is on: it loads numpy and onnxruntime."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from daemon.config import RecallConfig
from daemon.core.vectors import Coverage
from daemon.files.daily import DailyLog
from daemon.search.fusion import DENSE_CANDIDATES
from daemon.search.marks import MAX_HITS, has_terms
from daemon.search.semantic import DenseIndex, Semantic, load_semantic
from daemon.services.dense_store import StoredLines, StoredMarks, StoredVectors
from daemon.services.embedding_worker import EmbeddingWorker
from daemon.services.mark_search import MarkSearch
from daemon.store import Store


@dataclass
class SemanticRecall:
    semantic: Semantic
    vectors: StoredVectors
    substrate: DenseIndex[Any]
    lines: StoredLines
    marks: StoredMarks
    batch: int
    worker: EmbeddingWorker | None = None  # the daemon's (see :meth:`attach`)

    def mark_search(self) -> MarkSearch:
        """The marks' search, fusing their stored vectors; a forget deletes the forgotten
        marks' vectors through it."""

        def erase_outdated() -> int:
            erased = self.vectors.delete(lambda dense: dense.outdated_marks())
            if self.worker is not None:
                self.worker.forgotten()
            return erased

        return MarkSearch(self.marks, erase_outdated)

    def attach(self, daily: DailyLog, mark_search: MarkSearch) -> EmbeddingWorker:
        """The daemon's embedding worker over these parts (not started)."""
        self.worker = EmbeddingWorker(
            self.vectors, self.semantic, daily, mark_search, self.substrate, batch=self.batch
        )
        daily.on_redact(self.worker.forget_lines)
        return self.worker

    def search_ahead(
        self, query: str, *, lines_since: date | Literal[False] | None, marks_of: str | None
    ) -> None:
        """Start embedding the question recall will rank by meaning, if anything is
        embedded to rank (see :meth:`Semantic.embed_query_ahead`), then searching by it
        the daily lines from ``lines_since`` on (None: all; False: recall leaves the daily
        layer out) and the marks of ``marks_of`` (None: recall leaves the marks out), in
        the order recall asks for them."""
        if not (self.vectors.embedded or len(self.substrate)):
            return
        self.semantic.embed_query_ahead(query)
        if not self.vectors.embedded:
            return
        if lines_since is not False:
            self.lines.search_ahead(query, DENSE_CANDIDATES, since=lines_since)
        if marks_of is not None and has_terms(query):  # (what the marks' search looks up)
            self.marks.search_ahead(query, MAX_HITS, scope=marks_of)

    def coverage(self) -> Coverage:
        """How much is embedded: the worker's count, or (a process without one: the CLI)
        the stored vectors of the daily lines and marks, of all of them and of the
        substrate's lines (which only the daemon embeds)."""
        if self.worker is not None:
            return self.worker.coverage()
        stored = self.vectors.store.read_sync(lambda tx: tx.dense.documents())
        total = stored + len(self.substrate) + self.substrate.pending
        return Coverage(min(self.vectors.embedded, stored), total)


def load_semantic_recall(config: RecallConfig, store: Store, *, daemon: bool) -> SemanticRecall:
    """The parts ``config`` describes over ``store``; ``daemon``: this process embeds (and
    writes the vectors), else it only reads them. Raises SemanticUnavailable when the model
    cannot be loaded."""
    semantic = load_semantic(config)
    dimension = semantic.embedder.dimension
    vectors = StoredVectors(
        store, config.vectors, semantic.embedder.model_id, dimension, writable=daemon
    )
    return SemanticRecall(
        semantic,
        vectors,
        DenseIndex(semantic),
        StoredLines(vectors, semantic),
        StoredMarks(vectors, semantic),
        config.embed_batch,
    )
