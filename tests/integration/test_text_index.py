"""The text index in the store (SQLite FTS5, PostgreSQL tsvector), the same seam in memory,
and the daily layer and marks kept in it incrementally."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import structlog
from sqlalchemy import event
from support import merge_half_done
from test_marks_store import T0, insert, make_mark

from daemon.core.text_rows import DAILY, MARKS, SUBSTRATE, Group
from daemon.files.daily import DailyLog
from daemon.files.file_rows import FileRows, IndexedFile
from daemon.search.index import TextIndex, row_of
from daemon.search.memory_index import MemoryTextIndex
from daemon.services.mark_search import MarkSearch
from daemon.store import Store, StoreTextIndex, Tx
from daemon.store.migrate import upgrade

DAY = date(2026, 4, 11)
LINES = ["Anna: I went swimming in the lake", "the lake was cold", "", "Ben: swimming again"]


def indexes(store: Store) -> list[TextIndex]:
    return [StoreTextIndex(store), MemoryTextIndex()]


def test_rows_are_written_found_counted_moved_and_dropped(store: Store) -> None:
    for index in indexes(store):
        live = Group(DAILY, DAY.isoformat(), "live")
        index.write(live, [row_of(n, line) for n, line in enumerate(LINES, 1)], [], None)
        found = index.candidates(DAILY, ["swim", "lake"], 10)
        assert {(c.part, c.speaker) for c in found} == {(1, "anna"), (2, None), (4, "ben")}
        assert found[0].part == 1  # both terms
        stats = index.statistics(DAILY, ["swim", "lake", "absent"])
        assert (stats.documents, stats.total_length) == (3, 8)  # the empty line holds none
        assert stats.frequencies.get("swim") == 2 and stats.frequencies.get("absent", 0) == 0
        assert index.candidates(DAILY, ["swim"], 10, since="2026-04-12") == []
        assert index.candidates(MARKS, ["swim"], 10) == []  # another layer

        claimed = Group(DAILY, DAY.isoformat(), "claimed")
        index.move(live, claimed, 7)
        assert sorted(index.parts(DAILY, [DAY.isoformat()])) == [
            (DAY.isoformat(), "claimed", n) for n in (8, 9, 10, 11)
        ]
        index.write(claimed, [row_of(9, "the lake was warm")], [11], None)
        assert index.digests(claimed)[9] == row_of(9, "the lake was warm").digest
        assert [c.part for c in index.candidates(DAILY, ["swim"], 10)] == [8]
        index.drop(claimed)
        assert index.statistics(DAILY, ["lake"]).documents == 0
        assert index.candidates(DAILY, ["lake"], 10) == []


def test_a_mark_is_found_by_its_subjects_words_and_its_text(store: Store) -> None:
    """Issue 25, finding 4: ``recall arnold`` finds ``people.arnold.plans``."""
    insert(store, make_mark("mk_a", "people.arnold.plans", observation="moving to Lisbon"))
    marks = MarkSearch()

    def search(about: str) -> list[str]:
        return store.read_sync(lambda tx: marks.search(tx, "w", about))

    assert search("arnold") == ["mk_a"]  # queued: ranked in memory
    assert marks.index(store) == 1
    assert search("arnold") == ["mk_a"]  # from the store's index
    assert search("Lisbon plans") == ["mk_a"]
    assert search("people.arnold") == []  # a subject path is matched by prefix, elsewhere


def test_candidate_sources_are_the_candidates_sources_best_first_in_their_scope(
    store: Store,
) -> None:
    """Also when another scope's marks outrank the scope's own for the places asked for."""
    for n, (space, text) in enumerate(
        [("w", "tea"), ("w", "tea tea by the lake"), ("other", "tea tea tea"), ("w", "lake")]
    ):
        insert(store, make_mark(f"mk_{n}", f"user.n{n}", workspace_id=space, observation=text))
    MarkSearch().index(store)

    def both(tx: Tx, limit: int) -> tuple[list[str], list[str]]:
        whole = tx.text_index.candidates(MARKS, ["tea"], limit, scope="w")
        return [c.source for c in whole], tx.text_index.candidate_sources(
            MARKS, ["tea"], limit, scope="w"
        )

    whole, sources = store.read_sync(partial(both, limit=10))
    assert sources == whole and sorted(sources) == ["mk_0", "mk_1"]
    assert store.read_sync(partial(both, limit=1)) == (whole[:1], whole[:1])
    assert store.read_sync(
        lambda tx: tx.text_index.candidate_sources(MARKS, ["tea"], 1, scope="other")
    ) == ["mk_2"]


def test_forget_reaches_the_index_in_the_same_transaction(store: Store) -> None:
    insert(store, make_mark("mk_a", "user.health", observation="dentist on tuesday"))
    marks = MarkSearch()
    marks.index(store)
    store.write_sync(lambda tx: tx.marks.erase(["mk_a"], "asked", T0))
    found = store.read_sync(lambda tx: tx.text_index.candidates(MARKS, ["dentist"], 10))
    assert found == []
    assert store.read_sync(lambda tx: marks.search(tx, "w", "dentist")) == []
    marks.index(store)  # the erase queued it again: it stays out
    assert store.read_sync(lambda tx: tx.text_index.coverage()).get(MARKS, 0) == 0


@contextmanager
def sqlite_store(directory: Path) -> Iterator[Store]:
    """A started store on a new SQLite file at head in ``directory``."""
    url = f"sqlite:///{directory}/cambium.db"
    upgrade(url)
    store = Store(url)
    store.start()
    try:
        yield store
    finally:
        store.close()


def test_forgotten_text_leaves_the_sqlite_files(tmp_path: Path) -> None:
    """No term of a forgotten mark survives in FTS5's shadow tables, the rows, or the WAL."""
    with sqlite_store(tmp_path) as store:
        secret = "xylophonistic quizzicality"
        insert(store, make_mark("mk_a", "user.secret", observation=secret))
        insert(store, make_mark("mk_b", "user.other", observation="ordinary words here"))
        MarkSearch().index(store)
        files = [tmp_path / "cambium.db", tmp_path / "cambium.db-wal"]
        stems = [b"xylophonist", b"quizzic"]
        assert any(stem in path.read_bytes() for path in files for stem in stems)
        store.write_sync(lambda tx: tx.marks.erase(["mk_a"], "asked", T0))
        store.scrub()
        for path in files:
            data = path.read_bytes() if path.exists() else b""
            assert not any(stem in data for stem in stems), path.name
        found = store.read_sync(lambda tx: tx.text_index.candidates(MARKS, ["ordinari"], 10))
        assert [c.source for c in found] == ["mk_b"]  # the index still works


def test_a_window_without_lines_asks_fts5_nothing(tmp_path: Path) -> None:
    """FTS5 bounds its ranking by a recall's window of days only when given the window's
    ids as numbers: with no line in the window (a week without notes) it ranked every
    matching line of the years before, 10 ms in three years of notes, for the join to drop
    them all."""
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    with sqlite_store(tmp_path) as store:
        index = StoreTextIndex(store)
        live = Group(DAILY, DAY.isoformat(), "live")
        index.write(live, [row_of(n, line) for n, line in enumerate(LINES, 1)], [], None)
        event.listen(store._reader, "before_cursor_execute", seen)
        later = (DAY + timedelta(days=1)).isoformat()
        assert index.candidates(DAILY, ["swim"], 10, since=later) == []
        found = index.candidates(DAILY, ["swim"], 10, since=DAY.isoformat())
        assert sorted(c.part for c in found) == [1, 4]
    (matching,) = [s for s in statements if "MATCH" in s]  # the second's alone
    assert "min(id)" not in matching


def daily_in(store: Store, directory: Path) -> DailyLog:
    return DailyLog(directory, index=StoreTextIndex(store))


def hits(daily: DailyLog, query: str) -> list[tuple[str, str, tuple[int, int]]]:
    return [(h.date, h.excerpt, h.line_range) for h in daily.search(query, since=None, limit=10)]


def test_a_claimed_day_stays_visible_exactly_once(store: Store, tmp_path: Path) -> None:
    """Issue 25, finding 3: while a consolidation holds the day (in flight, or failed), the
    day's claimed lines are searched under that day, once, beside its archive and the live
    lines appended since."""
    daily = daily_in(store, tmp_path)
    daily.append(DAY, "first dentist visit")
    daily.archive(DAY)
    daily.append(DAY, "second dentist visit")
    claim = daily.claim(DAY)
    assert claim is not None and claim.offset == 1
    daily.append(DAY, "third dentist visit")
    found = hits(daily, "dentist")
    assert sorted(found) == [
        ("2026-04-11", "first dentist visit\nsecond dentist visit", (1, 2)),
        ("2026-04-11", "third dentist visit", (1, 1)),
    ]
    daily.merge(DAY)  # the claim's rows become archive rows: still once each
    assert sorted(hits(daily, "dentist")) == sorted(found)
    again = DailyLog(tmp_path)  # the same files in a fresh index in memory agree
    assert sorted(hits(again, "dentist")) == sorted(found)


def test_a_start_with_a_current_index_reads_no_unchanged_file(store: Store, tmp_path: Path) -> None:
    for n in range(5):
        day = DAY - timedelta(days=n)
        daily = daily_in(store, tmp_path)
        daily.append(day, f"walked the dog on day {n}")
        if n % 2:
            daily.archive(day)
    daily.append(DAY - timedelta(days=1), "late line for an archived day")
    first = daily_in(store, tmp_path)
    assert len(hits(first, "dog")) == 5
    assert first.rows.reads == 0  # every write indexed its line as it went

    restarted = daily_in(store, tmp_path)
    restarted.refresh()
    assert restarted.rows.reads == 0
    assert restarted.stale() == []
    (tmp_path / f"{DAY.isoformat()}.md").write_text("a cat now\n")  # edited by hand
    assert [(d, state) for d, state, _ in restarted.stale()] == [(DAY, "live")]
    assert [h[1] for h in hits(restarted, "cat")] == ["a cat now"]
    assert restarted.rows.reads == 2  # stale() looked, then the search's refresh re-read it
    assert len(hits(restarted, "dog")) == 4


def test_claims_and_merges_move_rows_instead_of_reading_the_day_again(
    store: Store, tmp_path: Path
) -> None:
    daily = daily_in(store, tmp_path)
    for line in ("kettle broke", "bought a kettle"):
        daily.append(DAY, line)
    before = store.read_sync(lambda tx: tx.text_index.coverage())
    daily.archive(DAY)
    assert store.read_sync(lambda tx: tx.text_index.coverage()) == before
    states = store.read_sync(lambda tx: tx.text_index.parts(DAILY, [DAY.isoformat()]))
    assert sorted(states) == [(DAY.isoformat(), "archived", 1), (DAY.isoformat(), "archived", 2)]
    restarted = daily_in(store, tmp_path)
    assert [h[2] for h in hits(restarted, "kettle")] == [(1, 2)]
    assert restarted.rows.reads == 0


@pytest.mark.parametrize("stale", [False, True])
def test_a_read_only_store_is_ranked_from_as_it_is_even_when_stale(
    store: Store, tmp_path: Path, stale: bool
) -> None:
    """The CLI with the daemon down reads the store's index as it is and never builds one,
    not even in memory (a year of notes would take minutes and a gigabyte): a line written
    since it was indexed is not found, and the log says the index is not current."""
    daily_in(store, tmp_path).append(DAY, "tea with Anna")
    if stale:
        with (tmp_path / f"{DAY.isoformat()}.md").open("a") as file:
            file.write("coffee with Bruno\n")
    kept = store.read_sync(lambda tx: tx.text_index.digests(Group(DAILY, DAY.isoformat(), "live")))
    reader = Store(store.url)  # never started: the CLI's read-only store
    try:
        daily = daily_in(reader, tmp_path)
        changed: list[None] = []
        daily.on_change(lambda: changed.append(None))
        assert [why for _, _, why in daily.stale()] == (
            ["changed since it was indexed"] if stale else []
        )
        assert [h[1] for h in hits(daily, "anna")] == ["tea with Anna"]
        assert hits(daily, "bruno") == []
        assert not isinstance(daily.rows.index, MemoryTextIndex)
        assert changed == []  # nothing was written, so the dense side has nothing to do
    finally:
        reader.close()
    now = store.read_sync(lambda tx: tx.text_index.digests(Group(DAILY, DAY.isoformat(), "live")))
    assert now == kept  # nothing written


def test_files_left_mid_merge_are_indexed_as_recall_numbers_them(
    store: Store, tmp_path: Path
) -> None:
    """An index built from the files (a rebuild, or a start on a new store) while a merge
    was cut short: the archive's lines count up to the merge's record, the claim's follow
    them, each line once; the progress is told for every file."""
    daily = DailyLog(tmp_path)
    archive = merge_half_done(daily, DAY, "first dentist visit", "the orthodontist called")
    with archive.open("a") as cut_short:
        cut_short.write("the orthod")
    daily.append(DAY, "third dentist visit")
    expected = {
        "dentist": [
            ("2026-04-11", "first dentist visit", (1, 1)),
            ("2026-04-11", "third dentist visit", (1, 1)),
        ],
        "orthodontist": [("2026-04-11", "the orthodontist called", (2, 2))],
        "orthod": [],  # the bytes a cut-short merge appended are not the archive's yet
    }
    for built in (daily_in(store, tmp_path), DailyLog(tmp_path)):
        told: list[tuple[int, int]] = []
        built.refresh(lambda done, files, told=told: told.append((done, files)))
        assert told == [(1, 3), (2, 3), (3, 3)]  # live, archived, claimed
        assert {query: sorted(hits(built, query)) for query in expected} == expected
    daily.merge(DAY)  # the merge finishes: the same lines, now all archived
    restarted = daily_in(store, tmp_path)
    assert {query: sorted(hits(restarted, query)) for query in expected} == expected
    assert restarted.stale() == []


def test_a_touched_file_is_read_once_and_a_rechecked_one_once(tmp_path: Path) -> None:
    """Size or mtime moved but the bytes did not: the file is read, nothing is written,
    and the new signature is kept, so the next look reads nothing. A file the watcher
    named is read once whatever its stat says. A file gone is said to be."""
    note = tmp_path / "note.md"
    note.write_text("the kettle broke\n")

    def texts(source: str, data: bytes, offset: int) -> list[tuple[int, str]]:
        return list(enumerate(data.decode().splitlines(), start=1))

    rows = FileRows(MemoryTextIndex(), SUBSTRATE, texts)
    written: list[list[int]] = []
    write = rows.index.write
    rows.index.write = lambda where, new, *rest: (  # type: ignore[method-assign]
        written.append([row.part for row in new]),
        write(where, new, *rest),
    )[-1]
    files = [IndexedFile(str(note), "", note.stat, lambda: (note.read_bytes(), 0))]

    def listed() -> list[IndexedFile]:
        return files

    assert rows.refresh(listed) is True
    assert (rows.reads, rows.refresh(listed)) == (1, False)
    os.utime(note, ns=(note.stat().st_atime_ns, note.stat().st_mtime_ns + 10**9))
    assert (rows.refresh(listed), rows.reads) == (False, 2)
    assert (rows.refresh(listed), rows.reads) == (False, 2)
    rows.recheck(str(note))
    assert (rows.refresh(listed), rows.reads) == (False, 3)
    assert (rows.refresh(listed), rows.reads) == (False, 3)
    note.write_text("the kettle broke\nwe bought a kettle\n")
    assert rows.refresh(listed) is True
    assert written == [[1], [], [], [2]]  # only the line that changed was written again
    assert rows.stale([]) == [(str(note), "", "indexed, but gone")]
    assert rows.refresh(list) is True
    assert rows.refresh(list) is False  # dropped once
    assert rows.index.candidates(SUBSTRATE, ["kettl"], 10) == []


def test_a_file_swapped_for_a_symlink_after_it_was_listed_is_skipped_with_a_warning(
    tmp_path: Path,
) -> None:
    """Another process may plant a symlink between the listing and the read: the search
    goes on without that file (never a failed recall) and says so once."""
    daily = DailyLog(tmp_path)
    daily.append(DAY, "tea with Anna")
    daily.archive(DAY)
    daily.append(DAY, "coffee with Bruno")
    (tmp_path / "elsewhere.md").write_text("a secret kept elsewhere\n")
    fresh = DailyLog(tmp_path)
    listed = fresh._day_files()
    for path in (daily.path(DAY), daily.path(DAY, archived=True)):
        path.unlink()
        path.symlink_to(tmp_path / "elsewhere.md")
    with structlog.testing.capture_logs() as logs:
        assert fresh.rows.refresh(lambda: listed) is False
        assert fresh.numbered_lines(DAY, archived=True) == []
        assert fresh.numbered_lines(DAY, archived=False) == []
    assert hits(fresh, "secret") == []
    warned = sorted((e["path"], e["reason"]) for e in logs if e["log_level"] == "warning")
    assert warned == sorted(
        (str(path), "refused: a symlink")
        for path in (daily.path(DAY), daily.path(DAY, archived=True))
    )


def test_a_leftover_claim_claimed_again_leaves_the_new_live_lines_indexed(
    store: Store, tmp_path: Path
) -> None:
    """A consolidation that died holding its claim is claimed again by the next one; the
    lines appended meanwhile stay live, and searchable, without a look at the files."""
    daily = DailyLog(tmp_path, index=StoreTextIndex(store), look_every=3600.0)
    daily.append(DAY, "tea with Anna")
    assert hits(daily, "anna") != []  # the one look at the files for the hour
    assert daily.claim(DAY) is not None  # and the consolidation dies
    daily.append(DAY, "coffee with Bruno")
    leftover = daily.claim(DAY)
    assert leftover is not None and leftover.leftover and leftover.lines == ["tea with Anna"]
    assert hits(daily, "bruno") == [("2026-04-11", "coffee with Bruno", (1, 1))]
    assert hits(daily, "anna") == [("2026-04-11", "tea with Anna", (1, 1))]
