"""The in-memory index of mark texts follows the table: marks stored after the first search
are found, whatever instant they carry, and only in their own workspace."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_fusion import MeaningEmbedder
from test_marks_store import T0, insert, make_mark

from daemon.search.marks import is_free_text
from daemon.services.mark_search import MarkSearch
from daemon.store import Store


def search(store: Store, index: MarkSearch, about: str, workspace: str = "w") -> list[str]:
    return store.read_sync(lambda tx: index.search(tx, workspace, about))


def test_marks_added_later_are_found_even_with_an_old_instant(store: Store) -> None:
    index = MarkSearch()
    insert(store, make_mark("mk_a", "user.food", observation="likes lentil soup"))
    assert search(store, index, "lentil") == ["mk_a"]
    recent = make_mark("mk_b", "user.food.dinner", observation="lentil curry on fridays")
    old = make_mark(
        "mk_c",
        "user.food.past",
        observation="lentils as a child",
        created_at=T0 - timedelta(days=400),
    )
    insert(store, recent, old)
    assert sorted(search(store, index, "lentil")) == ["mk_a", "mk_b", "mk_c"]
    assert search(store, index, "curry fridays") == ["mk_b"]
    assert search(store, index, "lentil", workspace="elsewhere") == []


def test_a_dotted_subject_path_is_not_free_text(store: Store) -> None:
    insert(store, make_mark("mk_a", "work.canteen", observation="user food menu"))
    assert search(store, MarkSearch(), "user.food") == []
    assert is_free_text("user food") and is_free_text("lentil") and not is_free_text("user.food")


def test_with_semantic_recall_a_mark_is_found_by_meaning_and_forgetting_deletes_its_embedding(
    store: Store, tmp_path: Path
) -> None:
    pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")
    semantic = pytest.importorskip(
        "daemon.search.semantic", reason="needs pip install 'cambium-memory[semantic]'"
    )
    cache = semantic.EmbeddingCache(tmp_path / "embeddings.sqlite", "meaning-test", 256)
    marks = semantic.Semantic.create(MeaningEmbedder(), cache, min_similarity=0.2).scoped("marks")
    violin = "practising violin every evening"
    insert(store, make_mark("mk_a", "user.hobbies", observation=violin))
    insert(store, make_mark("mk_b", "user.food", observation="lentil soup"))
    assert search(store, MarkSearch(), "which instrument") == []  # no word in common

    index = MarkSearch(semantic.DenseIndex(marks))
    assert search(store, index, "which instrument") == ["mk_a"]
    assert search(store, index, "lentil soup") == ["mk_b"]
    assert marks.cache.get_many([semantic.content_hash(violin)]) != {}

    store.write_sync(lambda tx: tx.marks.erase(["mk_a"], "asked", T0))
    assert search(store, index, "which instrument") == []
    assert marks.cache.get_many([semantic.content_hash(violin)]) == {}

    # A mark forgotten while the daemon was not running: the next start deletes its
    # embedding once it has read what every mark says.
    cache.scoped("marks").put_many([(semantic.content_hash("erased text"), np_row())])
    restarted = MarkSearch(semantic.DenseIndex(marks))
    store.read_sync(restarted.follow)
    assert len(marks.cache) == 1  # lentil soup's
    assert search(store, restarted, "soup") == ["mk_b"]


def np_row() -> Any:
    from daemon.search.embedding import normalise

    return normalise(__import__("numpy").ones((1, 256), dtype="float32"))[0]
