"""Dense retrieval for hybrid recall: the ``semantic`` extra (``pip install
'cambium-memory[semantic]'``, config ``[recall] semantic = true``), over the embedding
model of :mod:`daemon.search.embedding`.

- :class:`EmbeddingCache` keeps every embedding in a SQLite file beside the store, keyed by
  the model and the SHA-256 of the text, so a line or a learning is embedded once, however
  often its file is re-read or the daemon restarted.
- :class:`DenseIndex` holds one layer's vectors in a numpy matrix and ranks by brute-force
  cosine similarity (one matrix-vector product). A document may be given as several texts
  (a daily line: the line and its window); its vector is their embeddings' mean, so its
  similarity is the mean of theirs. Texts are queued when a layer adds them and embedded
  in one batch before the next search (or by :meth:`DenseIndex.flush`).

Brute force is fine at personal scale: 10,000 lines are 15 MB of float32 and well under a
millisecond per query; past a few hundred thousand lines (hundreds of MB, tens of ms) an
approximate index such as sqlite-vec or HNSW would be needed.
"""

from __future__ import annotations

import copy
import ctypes
import ctypes.util
import dataclasses
import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

from daemon.config import RecallConfig
from daemon.fs import make_private_file
from daemon.search.embedding import (
    BATCH,
    DEFAULT_MODEL_ID,
    Embedder,
    OnnxEmbedder,
    Vectors,
    packaged_model,
    quantized_model,
)

K = TypeVar("K", bound=Hashable)

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
    embedder = OnnxEmbedder(model, tokenizer, model_id=model_id, threads=config.threads)
    cache = EmbeddingCache(config.embeddings, embedder.model_id, embedder.dimension)
    return Semantic.create(embedder, cache, config.min_similarity)


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
            # A deleted embedding (a forgotten text's) is zeroed in the file, not left in a
            # free page.
            self._connection.execute("PRAGMA secure_delete=ON")
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

    def scoped(self, scope: str) -> EmbeddingCache:
        """A view of the same file whose rows are apart from this one's: a layer that must
        be able to delete what it cached (:meth:`delete`, :meth:`retain`) gets a scope of
        its own, so that it never deletes a vector another layer uses."""
        view = copy.copy(self)  # the same connection and lock
        view._model_id = f"{self._model_id}/{scope}"
        return view

    def delete(self, hashes: Iterable[bytes]) -> None:
        """Delete these rows, from the file and its write-ahead log too (see
        :meth:`_scrub`)."""
        with self._lock:
            with self._connection:
                deleted = self._connection.executemany(
                    "DELETE FROM embeddings WHERE model = ? AND hash = ?",
                    [(self._model_id, digest) for digest in hashes],
                ).rowcount
            self._scrub(deleted)

    def retain(self, hashes: Iterable[bytes]) -> None:
        """Delete every row of this model (or scope) but those of ``hashes``."""
        kept = set(hashes)
        with self._lock:
            with self._connection:
                stored = self._connection.execute(
                    "SELECT hash FROM embeddings WHERE model = ?", (self._model_id,)
                ).fetchall()
                deleted = self._connection.executemany(
                    "DELETE FROM embeddings WHERE model = ? AND hash = ?",
                    [(self._model_id, digest) for (digest,) in stored if digest not in kept],
                ).rowcount
            self._scrub(deleted)

    def _scrub(self, deleted: int) -> None:
        """After rows were deleted: copy the write-ahead log into the file and truncate it,
        so no old page holding a deleted hash or vector stays on disk (the caller holds the
        lock)."""
        if deleted > 0:
            self._connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")

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
    """The embedder and the cache one workspace's layers share."""

    embedder: Embedder
    cache: EmbeddingCache | None  # None: embeddings live in memory only
    # Below this cosine similarity a text is not about the query at all: without a floor
    # every query would find "the nearest" lines, however unrelated.
    min_similarity: float
    _queries: OrderedDict[str, Vectors]
    _lock: threading.Lock

    @classmethod
    def create(
        cls,
        embedder: Embedder,
        cache: EmbeddingCache | None,
        min_similarity: float = DEFAULT_MIN_SIMILARITY,
    ) -> Semantic:
        return cls(embedder, cache, min_similarity, OrderedDict(), threading.Lock())

    def scoped(self, scope: str) -> Semantic:
        """The same model, with its embeddings cached apart (see
        :meth:`EmbeddingCache.scoped`)."""
        cache = None if self.cache is None else self.cache.scoped(scope)
        return dataclasses.replace(self, cache=cache)

    def embed_texts(self, texts: Sequence[str]) -> Vectors:
        """Embeddings of ``texts``, from the cache where it has them; new ones are
        computed in batches and cached."""
        hashes = [content_hash(text) for text in texts]
        known = self.cache.get_many(hashes) if self.cache is not None else {}
        missing = {digest: text for digest, text in zip(hashes, texts, strict=True)}
        for digest in known:
            missing.pop(digest, None)
        if missing:
            fresh = self.embedder.embed(list(missing.values()))
            computed = dict(zip(missing, fresh, strict=True))
            if self.cache is not None:
                self.cache.put_many(computed.items())
            known.update(computed)
            if len(missing) > BATCH and _malloc_trim is not None:
                _malloc_trim(0)
        if not texts:
            return np.empty((0, self.embedder.dimension), dtype=np.float32)
        return np.stack([known[digest] for digest in hashes])

    def embed_query(self, query: str) -> Vectors:
        """One query's embedding (a row), remembered for the next few queries."""
        with self._lock:
            remembered = self._queries.get(query)
            if remembered is not None:
                self._queries.move_to_end(query)
                return remembered
        vector: Vectors = self.embedder.embed([query])[0]
        with self._lock:
            self._queries[query] = vector
            while len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector


class DenseIndex(Generic[K]):
    """One layer's documents as rows of a matrix, ranked by cosine similarity.

    Not thread-safe: the layer that owns it serialises access, as for its lexical index.
    """

    def __init__(self, semantic: Semantic) -> None:
        self._semantic = semantic
        self._rows: dict[K, int] = {}
        self._keys: list[K] = []
        self._matrix: Vectors = np.empty((0, semantic.embedder.dimension), dtype=np.float32)
        self._pending: dict[K, tuple[str, ...]] = {}
        self._hashes: dict[K, tuple[bytes, ...]] = {}  # of each document's texts

    def __len__(self) -> int:
        return len(self._rows) + len(self._pending)

    def add(self, key: K, texts: Sequence[str]) -> None:
        self.remove(key)
        kept = tuple(text for text in texts if text.strip())
        if kept:
            self._pending[key] = kept
            self._hashes[key] = tuple(content_hash(text) for text in kept)

    def remove(self, key: K) -> None:
        self._hashes.pop(key, None)
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

    def erase(self, key: K) -> None:
        """Remove ``key`` and delete its texts' embeddings from the cache: for text that
        must not outlive its deletion (give the index a scope of its own)."""
        hashes = self._hashes.get(key, ())
        self.remove(key)
        if self._semantic.cache is not None and hashes:
            self._semantic.cache.delete(hashes)

    def prune(self) -> None:
        """Delete from the cache every embedding of this index's scope that none of its
        documents uses: after a restart, what :meth:`erase` could not see."""
        if self._semantic.cache is not None:
            self._semantic.cache.retain(
                digest for hashes in self._hashes.values() for digest in hashes
            )

    def flush(self) -> None:
        """Embed what was added since the last flush (from the cache where possible)."""
        if not self._pending:
            return
        keys = list(self._pending)
        texts = list(dict.fromkeys(text for key in keys for text in self._pending[key]))
        embedded = dict(zip(texts, self._semantic.embed_texts(texts), strict=True))
        # A document's vector is the mean of its texts': its similarity to a query is the
        # mean of theirs (not unit length, so a mean of dissimilar texts scores lower).
        vectors = np.stack(
            [np.mean([embedded[t] for t in self._pending[key]], axis=0) for key in keys]
        )
        self._pending.clear()
        start = len(self._keys)
        needed = start + len(keys)
        if needed > self._matrix.shape[0]:
            grown = np.empty((max(needed, 2 * self._matrix.shape[0]), vectors.shape[1]), np.float32)
            grown[:start] = self._matrix[:start]
            self._matrix = grown
        self._matrix[start:needed] = vectors
        for offset, key in enumerate(keys):
            self._rows[key] = start + offset
        self._keys.extend(keys)

    def nearest(
        self, query: str, limit: int, *, where: Callable[[K], bool] | None = None
    ) -> dict[K, float]:
        self.flush()
        count = len(self._keys)
        if count == 0 or limit <= 0:
            return {}
        similarities = self._matrix[:count] @ self._semantic.embed_query(query)
        if where is None and limit < count:
            top = np.argpartition(-similarities, limit)[:limit]
            order = top[np.argsort(-similarities[top], kind="stable")]
        else:
            order = np.argsort(-similarities, kind="stable")
        found: dict[K, float] = {}
        floor = self._semantic.min_similarity
        for row in order:
            similarity = float(similarities[row])
            if similarity < floor:
                break
            key = self._keys[row]
            if where is None or where(key):
                found[key] = similarity
                if len(found) == limit:
                    break
        return found
