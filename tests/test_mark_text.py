"""The in-memory index of mark texts follows the table: marks stored after the first search
are found, whatever instant they carry, and only in their own workspace."""

from __future__ import annotations

from datetime import timedelta

from test_marks_store import T0, insert, make_mark

from daemon.services.mark_text import MarkText, is_free_text
from daemon.store import Store


def search(store: Store, index: MarkText, about: str, workspace: str = "w") -> list[str]:
    return store.read_sync(lambda tx: index.search(tx, workspace, about))


def test_marks_added_later_are_found_even_with_an_old_instant(store: Store) -> None:
    index = MarkText()
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
    assert search(store, MarkText(), "user.food") == []
    assert is_free_text("user food") and is_free_text("lentil") and not is_free_text("user.food")
