"""A deleted embedding (a forgotten text's) leaves no byte in the cache's file or its
write-ahead log: the rows are zeroed (``secure_delete``) and the log is checkpointed and
truncated right after the delete."""

from __future__ import annotations

from pathlib import Path

import pytest

np = pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")
semantic = pytest.importorskip(
    "daemon.search.semantic", reason="needs pip install 'cambium-memory[semantic]'"
)


def test_a_deleted_embedding_is_gone_from_the_file_and_its_log(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = semantic.EmbeddingCache(path, "model", 4)
    forgotten = semantic.content_hash("dentist with Dr Okafor on Friday")
    kept = semantic.content_hash("lunch with Bea")
    vector = np.array([0.25, -0.5, 0.75, 1.0], dtype=np.float32)
    try:
        cache.put_many([(forgotten, vector), (kept, vector * 2)])
        cache.delete([forgotten])
        log = path.with_name(path.name + "-wal")
        on_disk = path.read_bytes() + (log.read_bytes() if log.exists() else b"")
        assert forgotten not in on_disk
        assert kept in on_disk  # the search sees what is there
        assert list(cache.get_many([forgotten, kept])) == [kept]
    finally:
        cache.close()
