"""The in-memory index of mark texts follows the table: marks stored after the first search
are found, whatever instant they carry, and only in their own workspace."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from test_marks_store import T0, insert, make_mark

from daemon.search.text import is_free_text
from daemon.services import mark_search
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


def test_indexing_the_queue_says_how_far_it_is_between_chunks(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start's preparation after an import of 100,000 marks showed "preparing, marks"
    for half a minute: now it says how many of how many are indexed."""
    monkeypatch.setattr(mark_search, "CHUNK", 2)
    insert(store, *(make_mark(f"mk_{n}", "user.food", observation=f"dish {n}") for n in range(5)))
    told: list[tuple[int, int]] = []
    assert MarkSearch().index(store, lambda done, total: told.append((done, total))) == 5
    assert told == [(2, 5), (4, 5)]


def test_a_dotted_subject_path_is_not_free_text(store: Store) -> None:
    insert(store, make_mark("mk_a", "work.canteen", observation="user food menu"))
    assert search(store, MarkSearch(), "user.food") == []
    assert is_free_text("user food") and is_free_text("lentil") and not is_free_text("user.food")


def test_with_semantic_recall_a_mark_is_found_by_meaning_and_forgetting_deletes_its_vector(
    store: Store, tmp_path: Path
) -> None:
    pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")
    from test_fusion import stored_parts

    from daemon.files.daily import DailyLog
    from daemon.search.fusion import meaning_hash

    parts = stored_parts(store, tmp_path, batch=1)  # a page per mark
    index = parts.mark_search()
    worker = parts.attach(DailyLog(tmp_path / "daily"), index)
    violin = "practising violin every evening"
    insert(store, make_mark("mk_a", "user.hobbies", observation=violin))
    insert(store, make_mark("mk_b", "user.food", observation="lentil soup"))
    assert search(store, MarkSearch(), "which instrument") == []  # no word in common
    assert search(store, index, "which instrument") == []  # not embedded yet
    worker.run_once()
    assert search(store, index, "which instrument") == ["mk_a"]
    assert search(store, index, "lentil soup") == ["mk_b"]
    assert search(store, index, "which instrument", workspace="elsewhere") == []
    assert (worker.coverage().embedded, worker.coverage().total) == (2, 2)

    def hashes() -> set[bytes]:
        rows = store.read_sync(lambda tx: tx.dense.get(tx.dense.ids()))
        found = store.read_sync(lambda tx: tx.dense.by_hash([meaning_hash((violin,))]))
        return {row.place.source.encode() for row in rows} | set(found)

    assert meaning_hash((violin,)) in hashes()
    store.write_sync(lambda tx: tx.marks.erase(["mk_a"], "asked", T0))
    assert index.erase_outdated() == 1  # what the forget receptor does next
    assert hashes() == {b"mk_b"}
    assert search(store, index, "which instrument") == []
    assert search(store, index, "soup") == ["mk_b"]
    worker.run_once()  # nothing comes back
    assert hashes() == {b"mk_b"}


def test_a_pass_reads_the_marks_written_since_the_last_and_looks_at_them_all_seldom(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each stored mark wakes the worker, and a read of every mark's vector state (for
    stale vectors, or for marks to embed) costs 0.1 s at 100,000 marks: with that many
    embedded, a signal a second had kept the worker at half a core. A pass reads the text
    rows written since the last pass saw; every mark is looked at by the first pass and at
    most every ``SWEEP_EVERY`` seconds."""
    pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")
    from test_fusion import stored_parts

    from daemon.files.daily import DailyLog
    from daemon.services.embedding_worker import SWEEP_EVERY
    from daemon.store import DenseRows

    reads: dict[str, list[Any]] = {
        "marks_to_embed": [],
        "marks_written_since": [],
        "outdated_marks": [],
    }
    for name in reads:
        original = getattr(DenseRows, name)

        def counted(self: DenseRows, *args: Any, _name: str = name, _f: Any = original) -> Any:
            found = _f(self, *args)
            reads[_name].append((args[1:], [m.id for m in found] if _name[0] == "m" else found))
            return found

        monkeypatch.setattr(DenseRows, name, counted)
    parts = stored_parts(store, tmp_path, batch=4)
    worker = parts.attach(DailyLog(tmp_path / "daily"), parts.mark_search())
    now = [0.0]
    monkeypatch.setattr(worker, "_clock", lambda: now[0])
    insert(store, make_mark("mk_a", "user.hobbies", observation="practising violin"))
    insert(store, make_mark("mk_b", "user.food", observation="lentil soup"))
    assert worker.run_once()
    # The first pass looks at every mark; a short page is the last.
    assert reads == {
        "marks_to_embed": [(("",), ["mk_a", "mk_b"])],
        "marks_written_since": [],
        "outdated_marks": [((), [])],
    }
    last = store.read_sync(lambda tx: tx.dense.last_text_row())
    insert(store, make_mark("mk_c", "user.food", observation="figs for breakfast"))
    now[0] = SWEEP_EVERY / 2
    assert worker.run_once()
    assert reads["marks_written_since"] == [((last,), ["mk_c"])]  # not before the last began
    assert len(reads["marks_to_embed"]) == len(reads["outdated_marks"]) == 1
    assert worker.coverage().embedded == 3
    now[0] = SWEEP_EVERY * 1.5
    assert not worker.run_once()
    assert reads["marks_to_embed"][1:] == [(("",), [])]
    assert len(reads["outdated_marks"]) == 2 and len(reads["marks_written_since"]) == 1


def test_a_pass_counts_the_documents_written_while_it_ran(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")
    from test_fusion import stored_parts

    from daemon.files.daily import DailyLog

    parts = stored_parts(store, tmp_path)
    worker = parts.attach(DailyLog(tmp_path / "daily"), parts.mark_search())
    embed_marks = worker._marks

    def marks_while_another_comes() -> bool:
        worked = embed_marks()
        insert(store, make_mark("mk_z", "user.food", observation="figs for breakfast"))
        MarkSearch().index(store)
        return worked

    monkeypatch.setattr(worker, "_marks", marks_while_another_comes)
    insert(store, make_mark("mk_a", "user.hobbies", observation="practising violin"))
    worker.run_once()
    assert (worker.coverage().embedded, worker.coverage().total) == (1, 2)


def test_marks_written_after_a_forget_are_embedded_by_the_next_pass(
    store: Store, tmp_path: Path
) -> None:
    """On SQLite a forget that deletes the last text rows lets the next marks' rows take
    their numbers, behind what the worker has seen: the forget has its next pass look at
    every mark, so none waits for the periodic look."""
    pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")
    from test_fusion import stored_parts

    from daemon.files.daily import DailyLog

    parts = stored_parts(store, tmp_path, batch=4)
    index = parts.mark_search()
    worker = parts.attach(DailyLog(tmp_path / "daily"), index)
    insert(store, *(make_mark(f"mk_{c}", "user.food", observation=f"{c} soup") for c in "abc"))
    worker.run_once()
    rows = text_rows(store, "mk_b", "mk_c")
    store.write_sync(lambda tx: tx.marks.erase(["mk_b", "mk_c"], "asked", T0))
    assert index.erase_outdated() == 2  # what the forget receptor does next
    MarkSearch().index(store)
    insert(store, make_mark("mk_d", "user.hobbies", observation="practising violin"))
    insert(store, make_mark("mk_e", "user.hobbies", observation="tuning the cello"))
    MarkSearch().index(store)
    if store.dialect == "sqlite":  # (the case this is about)
        assert text_rows(store, "mk_d", "mk_e") == rows
    worker.run_once()
    assert (worker.coverage().embedded, worker.coverage().total) == (3, 3)


def text_rows(store: Store, *mark_ids: str) -> list[int]:
    def read(tx: Any) -> list[int]:
        marks = ", ".join(f"'{mark_id}'" for mark_id in mark_ids)
        found = tx.connection.exec_driver_sql(
            f"SELECT id FROM text_rows WHERE layer = 'marks' AND source IN ({marks}) ORDER BY id"
        )
        return [row[0] for row in found]

    return store.read_sync(read)


def test_the_searches_by_meaning_start_ahead_beside_the_caller_and_are_taken_once(
    store: Store, tmp_path: Path
) -> None:
    """Recall starts searching the daily lines' and the marks' vectors in the query thread,
    behind the question's embedding, while its lexical work runs; each search then takes
    that answer instead of scanning again. Nothing is started for what recall would not
    ask (a layer left out, a subject path for the marks)."""
    pytest.importorskip("numpy", reason="needs pip install 'cambium-memory[semantic]'")
    import threading
    from datetime import date

    from test_fusion import stored_parts

    from daemon.files.daily import DailyLog
    from daemon.search.fusion import DENSE_CANDIDATES

    parts = stored_parts(store, tmp_path)
    index = parts.mark_search()
    worker = parts.attach(DailyLog(tmp_path / "daily"), index)
    insert(store, make_mark("mk_a", "user.hobbies", observation="practising violin"))
    worker.run_once()
    scanned: list[tuple[str, str]] = []

    def recording(ranker: Any) -> None:
        scan = ranker._nearest

        def nearest(*asked: Any) -> Any:
            scanned.append((type(ranker).__name__, threading.current_thread().name))
            return scan(*asked)

        ranker._nearest = nearest

    recording(parts.lines)
    recording(parts.marks)
    since = date(2026, 4, 1)
    parts.search_ahead("which instrument", lines_since=since, marks_of="w")
    assert parts.lines.nearest("which instrument", DENSE_CANDIDATES, since=since) == {}
    assert search(store, index, "which instrument") == ["mk_a"]
    assert [ranker for ranker, _ in scanned] == ["StoredLines", "StoredMarks"]
    assert all(thread.startswith("cambium-query") for _, thread in scanned)
    assert search(store, index, "which instrument") == ["mk_a"]
    assert scanned[2:] == [("StoredMarks", threading.current_thread().name)], "taken once"
    parts.search_ahead("user.hobbies", lines_since=False, marks_of="w")
    parts.search_ahead("which instrument", lines_since=False, marks_of=None)
    parts.semantic.ahead(lambda: None).result()  # (what was started has run)
    assert len(scanned) == 3


def test_each_page_of_marks_to_embed_starts_where_the_last_ended(store: Store) -> None:
    """The worker reads the marks to embed a page at a time: a page seeks past the last
    one's marks instead of passing every mark embedded since the pass began (on 100,000
    marks, 76 ms a page, most of the worker's time outside the model). A look at every mark
    goes by their ids; a pass between, by the text rows written since the last began."""
    insert(store, *(make_mark(f"mk_{c}", "user.food", observation=f"{c} soup") for c in "cab"))
    MarkSearch().index(store)
    a, b, c = text_rows(store, "mk_a", "mk_b", "mk_c")

    def page(after: str) -> list[str]:
        return [m.id for m in store.read_sync(lambda tx: tx.dense.marks_to_embed(2, after))]

    def written(since: int) -> list[str]:
        found = store.read_sync(lambda tx: tx.dense.marks_written_since(2, since))
        return [m.id for m in found]

    assert page("") == ["mk_a", "mk_b"]
    assert page("mk_b") == ["mk_c"]
    assert page("mk_c") == []
    assert written(0) == ["mk_a", "mk_b"]
    assert written(b) == ["mk_b", "mk_c"]  # (from the row seen on: it has a vector by then)
    assert written(c + 1) == []
    assert store.read_sync(lambda tx: tx.dense.last_text_row()) == c
    if store.dialect == "sqlite":
        assert "source>?" in plan(store, lambda: page("mk_a"))
        assert "rowid>?" in plan(store, lambda: written(a))


def plan(store: Store, read: Callable[[], object]) -> str:
    """SQLite's plan for the statement ``read`` runs on the vectors (no sort: an index gives
    the order)."""
    statements: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    event.listen(store._reader, "before_cursor_execute", seen)
    try:
        read()
    finally:
        event.remove(store._reader, "before_cursor_execute", seen)
    ((statement, parameters),) = (s for s in statements if "dense_vectors" in s[0])
    rows = store.read_sync(
        lambda tx: tx.connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
    ).all()
    steps = " / ".join(row[-1] for row in rows)
    assert "TEMP B-TREE" not in steps, steps
    return steps
