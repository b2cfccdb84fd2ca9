"""Dense retrieval for hybrid recall: the ``semantic`` extra (``pip install
'cambium-memory[semantic]'``, config ``[recall] semantic = true``), over the embedding
model of :mod:`daemon.search.embedding`.

- :class:`Semantic` is the model one workspace's layers share, with the similarity floor and
  the embeddings of recent queries.
- The daily lines' and the marks' vectors are stored rows, searched through a
  memory-mapped copy (:mod:`daemon.search.vector_file`, :mod:`daemon.services.dense_store`).
- The substrate's lines (the person's own few files, never in the store) are ranked by a
  :class:`DenseIndex` in memory, whose embeddings are cached by content hash in a SQLite
  file of their own (:class:`EmbeddingCache`), so a restart embeds nothing again.

Nothing here embeds on a recall's behalf but its query: documents are embedded by the
daemon's background worker (:meth:`DenseIndex.flush`), and until then a layer ranks them
lexically alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

from daemon.config import RecallConfig
from daemon.fs import make_private_file
from daemon.search.embedding import (
    BATCH,
    DEFAULT_MODEL_ID,
    ONE_MEGABYTE,
    Embedder,
    OnnxEmbedder,
    Vectors,
    packaged_model,
    quantized_model,
)

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

QUERY_CACHE = 256  # recent query embeddings kept in memory
# For all-MiniLM-L6-v2: unrelated sentences score about 0 to 0.2. On the LoCoMo dev set a
# floor up to 0.3 loses no answer (bench/locomo.py).
DEFAULT_MIN_SIMILARITY = 0.3


# glibc keeps the heap a batch freed for the process's next allocations; about 120 MB after
# embedding 900 texts, which an idle daemon would then hold. malloc_trim hands it back (None
# where the C library has no such call).
_malloc_trim = getattr(ctypes.CDLL(ctypes.util.find_library("c")), "malloc_trim", None)


def load_semantic(config: RecallConfig) -> Semantic:
    """The embedder and cache that ``[recall]`` describes. Raises SemanticUnavailable when
    the model cannot be loaded."""
    if config.model is not None and config.tokenizer is not None:
        model, tokenizer, model_id = config.model, config.tokenizer, config.model.stem
    else:
        packaged, tokenizer = packaged_model()
        model = quantized_model(packaged, config.embeddings.parent / f"{DEFAULT_MODEL_ID}.onnx")
        model_id = DEFAULT_MODEL_ID
    embedder = OnnxEmbedder(
        model,
        tokenizer,
        model_id=model_id,
        threads=config.threads,
        memory_bytes=config.embed_memory_mb * ONE_MEGABYTE,
    )
    cache = EmbeddingCache(config.embeddings, embedder.model_id, embedder.dimension)
    return Semantic.create(embedder, cache, config.min_similarity)


def release_memory() -> None:
    """Hand the heap a batch freed back to the system (see ``_malloc_trim``)."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def content_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class EmbeddingCache:
    """Embeddings by (model, SHA-256 of the text), in a SQLite file of their own: derived
    data, so losing the file costs only the time to embed again. Thread-safe."""

    def __init__(self, path: Path, model_id: str, dimension: int) -> None:
        self.path = path
        self._model_id = model_id
        self._dimension = dimension
        self._lock = threading.Lock()
        # Vectors say something of the texts they came from: private, like the store.
        make_private_file(path)
        self._connection = sqlite3.connect(path, check_same_thread=False)
        with self._lock, self._connection:
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute(
                "CREATE TABLE IF NOT EXISTS embeddings ("
                " model TEXT NOT NULL, hash BLOB NOT NULL, vector BLOB NOT NULL,"
                " PRIMARY KEY (model, hash)) WITHOUT ROWID"
            )

    def get_many(self, hashes: Iterable[bytes]) -> dict[bytes, Vectors]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[bytes, Vectors] = {}
        with self._lock:
            # SQLite allows 32,766 parameters per statement.
            for start in range(0, len(wanted), 10_000):
                chunk = wanted[start : start + 10_000]
                marks = ",".join("?" * len(chunk))
                rows = self._connection.execute(
                    f"SELECT hash, vector FROM embeddings WHERE model = ? AND hash IN ({marks})",
                    [self._model_id, *chunk],
                )
                for digest, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape == (self._dimension,):
                        found[digest] = vector
        return found

    def put_many(self, items: Iterable[tuple[bytes, Vectors]]) -> None:
        rows = [
            (self._model_id, digest, vector.astype(np.float32).tobytes())
            for digest, vector in items
        ]
        with self._lock, self._connection:
            self._connection.executemany(
                "INSERT OR REPLACE INTO embeddings (model, hash, vector) VALUES (?, ?, ?)", rows
            )

    def __len__(self) -> int:
        with self._lock:
            row = self._connection.execute(
                "SELECT count(*) FROM embeddings WHERE model = ?", (self._model_id,)
            ).fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._connection.close()


@dataclass
class Semantic:
    """The embedder (and the substrate's embedding cache) one workspace's layers share."""

    embedder: Embedder
    cache: EmbeddingCache | None  # None: the substrate's embeddings live in memory only
    # Below this cosine similarity a text is not about the query at all: without a floor
    # every query would find "the nearest" lines, however unrelated.
    min_similarity: float
    _queries: OrderedDict[str, Future[Vectors]]
    _lock: threading.Lock
    _ahead: ThreadPoolExecutor

    @classmethod
    def create(
        cls,
        embedder: Embedder,
        cache: EmbeddingCache | None,
        min_similarity: float = DEFAULT_MIN_SIMILARITY,
    ) -> Semantic:
        ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cambium-query")
        return cls(embedder, cache, min_similarity, OrderedDict(), threading.Lock(), ahead)

    def embed_texts(self, texts: Sequence[str], *, interruptible: bool = False) -> Vectors:
        """Embeddings of ``texts``, from the cache where it has them; new ones are
        computed in batches and cached. ``interruptible``: a background batch (see
        :meth:`Embedder.interrupt <daemon.search.embedding.Embedder.interrupt>`)."""
        hashes = [content_hash(text) for text in texts]
        known = self.cache.get_many(hashes) if self.cache is not None else {}
        missing = {digest: text for digest, text in zip(hashes, texts, strict=True)}
        for digest in known:
            missing.pop(digest, None)
        if missing:
            fresh = self.embedder.embed(list(missing.values()), interruptible=interruptible)
            computed = dict(zip(missing, fresh, strict=True))
            if self.cache is not None:
                self.cache.put_many(computed.items())
            known.update(computed)
            if len(missing) > BATCH:
                release_memory()
        if not texts:
            return np.empty((0, self.embedder.dimension), dtype=np.float32)
        return np.stack([known[digest] for digest in hashes])

    def embed_query(self, query: str) -> Vectors:
        """One query's embedding (a row), remembered for the next few queries."""
        future, mine = self._remembered(query)
        if mine:
            self._embed_into(future, query)
        return future.result()

    def embed_query_ahead(self, query: str) -> None:
        """Start embedding ``query`` in a thread of its own, to be ready when recall asks:
        the model leaves the interpreter free meanwhile, so recall's lexical work goes on
        beside it on another core."""
        future, mine = self._remembered(query)
        if mine:
            self._ahead.submit(self._embed_into, future, query)

    def ahead(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` in the query thread, after the embeddings started ahead before it
        (what needs the question's embedding can follow it there, beside recall's lexical
        work)."""
        return self._ahead.submit(work)

    def _remembered(self, query: str) -> tuple[Future[Vectors], bool]:
        """The query's embedding, done or under way, and whether the caller must compute it."""
        with self._lock:
            future = self._queries.get(query)
            if future is not None:
                self._queries.move_to_end(query)
                return future, False
            future = self._queries[query] = Future()
            while len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
            return future, True

    def _embed_into(self, future: Future[Vectors], query: str) -> None:
        try:
            future.set_result(self.embedder.embed([query])[0])
        except BaseException as exc:
            with self._lock:  # not remembered: the next recall of it tries again
                if self._queries.get(query) is future:
                    del self._queries[query]
            future.set_exception(exc)


def mean_meaning(vectors: Vectors) -> Vectors:
    """A document's vector from its texts': their mean. Its similarity to a query is the
    mean of theirs (not unit length, so a mean of dissimilar texts scores lower)."""
    mean: Vectors = np.mean(vectors, axis=0).astype(np.float32)
    return mean


class DenseIndex(Generic[K]):
    """Documents (the substrate's lines) as rows of a matrix in memory, ranked by cosine
    similarity. Added documents wait until :meth:`flush` embeds them (the daemon's worker,
    in bounded batches); :meth:`nearest` ranks what is embedded and never waits. Thread-safe:
    the model runs outside the lock."""

    def __init__(self, semantic: Semantic) -> None:
        self._semantic = semantic
        self._lock = threading.Lock()
        self._rows: dict[K, int] = {}
        self._keys: list[K] = []
        self._matrix: Vectors = np.empty((0, semantic.embedder.dimension), dtype=np.float32)
        self._pending: dict[K, tuple[str, ...]] = {}

    def __len__(self) -> int:
        """How many documents are embedded."""
        return len(self._rows)

    @property
    def pending(self) -> int:
        """How many documents wait to be embedded."""
        return len(self._pending)

    def add(self, key: K, texts: Sequence[str]) -> None:
        with self._lock:
            self._remove(key)
            kept = tuple(text for text in texts if text.strip())
            if kept:
                self._pending[key] = kept

    def remove(self, key: K) -> None:
        with self._lock:
            self._remove(key)

    def _remove(self, key: K) -> None:
        if self._pending.pop(key, None) is not None:
            return
        row = self._rows.pop(key, None)
        if row is None:
            return
        # The last row moves into the gap, so the matrix stays dense.
        last = len(self._keys) - 1
        if row != last:
            moved = self._keys[last]
            self._keys[row] = moved
            self._matrix[row] = self._matrix[last]
            self._rows[moved] = row
        self._keys.pop()

    def flush(self, limit: int | None = None, *, interruptible: bool = False) -> int:
        """Embed up to ``limit`` of the documents waiting (all by default); how many."""
        with self._lock:
            taken = dict(list(self._pending.items())[:limit])
        if not taken:
            return 0
        texts = list(dict.fromkeys(text for held in taken.values() for text in held))
        embedded = dict(
            zip(texts, self._semantic.embed_texts(texts, interruptible=interruptible), strict=True)
        )
        with self._lock:
            # Only documents still waiting with the same texts: one removed or changed
            # meanwhile is not brought back.
            kept = [key for key, held in taken.items() if self._pending.get(key) == held]
            for key in kept:
                self._append(key, mean_meaning(np.stack([embedded[t] for t in taken[key]])))
                del self._pending[key]
        return len(taken)

    def _append(self, key: K, vector: Vectors) -> None:
        row = len(self._keys)
        if row == self._matrix.shape[0]:
            grown = np.empty((max(16, 2 * row), vector.shape[0]), np.float32)
            grown[:row] = self._matrix[:row]
            self._matrix = grown
        self._matrix[row] = vector
        self._rows[key] = row
        self._keys.append(key)

    def nearest(self, query: str, limit: int) -> dict[K, float]:
        """The ``limit`` embedded documents most similar to ``query`` (at least the
        similarity floor), mapped to their cosine similarity."""
        if limit <= 0 or not self._rows:
            return {}
        vector = self._semantic.embed_query(query)
        with self._lock:
            count = len(self._keys)
            similarities = self._matrix[:count] @ vector
            if limit < count:
                top = np.argpartition(-similarities, limit)[:limit]
                order = top[np.argsort(-similarities[top], kind="stable")]
            else:
                order = np.argsort(-similarities, kind="stable")
            floor = self._semantic.min_similarity
            return {
                self._keys[row]: float(similarities[row])
                for row in order
                if similarities[row] >= floor
            }
