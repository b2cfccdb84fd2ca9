"""Recall over years of notes: a query's common words do not choose the candidates (a name is
in every line its speaker says) but still rank them; common terms' counts are kept, a new
word's never; the daemon looks for hand-edited daily files now and then, not at every
recall."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from test_marks_store import insert, make_mark

from daemon.core.text_rows import DAILY, MARKS, Group, Statistics
from daemon.files.compost import Compost
from daemon.files.daily import DailyLog
from daemon.files.file_rows import FileRows
from daemon.files.substrate import Substrate
from daemon.search import daily as daily_search
from daemon.search.index import row_of, selective
from daemon.services.mark_search import MarkSearch
from daemon.services.recall import Memory
from daemon.store import Store, StoreTextIndex, text_index
from daemon.store.text_index import TextRows

DAY = date(2026, 4, 11)


def test_terms_held_by_more_rows_than_asked_for_do_not_choose() -> None:
    stats = Statistics(100, 500, {"anna": 90, "lake": 40, "swim": 3})
    assert selective(["anna", "lake", "swim", "absent"], stats, 50) == ["lake", "swim"]
    assert selective(["anna", "lake"], stats, 10) == ["lake"]  # all common: the rarest
    assert selective(["absent"], stats, 10) == []


def recording(monkeypatch: pytest.MonkeyPatch, layer: str) -> list[list[str]]:
    """The terms each candidates query of ``layer`` asks the store for, from now on."""
    asked: list[list[str]] = []
    original = TextRows.candidates

    def candidates(self: TextRows, of: str, wanted: Sequence[str], *args: Any, **kw: Any) -> Any:
        if of == layer:
            asked.append(list(wanted))
        return original(self, of, wanted, *args, **kw)

    monkeypatch.setattr(TextRows, "candidates", candidates)
    return asked


def test_daily_lines_are_chosen_by_rare_terms_and_ranked_by_all(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daily_search, "CANDIDATES", 3)
    asked = recording(monkeypatch, DAILY)
    daily = DailyLog(tmp_path, index=StoreTextIndex(store))
    for line in ("Ben: pebble", "Anna: lake", "Anna: tea", "Anna: bread", "Anna: pebble"):
        daily.append(DAY, line)
    found = daily.search("Anna pebble", since=None, limit=1)
    assert asked[-1] == ["pebbl"]  # "anna", in four lines of five, chose nothing
    assert found[0].line_range == (5, 5)  # …but still ranks: both words beat one


def test_marks_are_chosen_by_rare_terms(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("daemon.services.mark_search.CHOOSING", 2)
    for n, text in enumerate(("walked the dog", "fed the dog", "dog and kettle")):
        insert(store, make_mark(f"mk_{n}", f"user.pets.n{n}", observation=text))
    marks = MarkSearch()
    marks.index(store)
    asked = recording(monkeypatch, MARKS)
    assert store.read_sync(lambda tx: marks.search(tx, "w", "dog kettle")) == ["mk_2"]
    assert asked == [["kettl"]]


def test_a_word_new_to_the_log_is_found_at_once_while_common_counts_are_kept(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(text_index, "_KEPT_FROM", 1)  # keep every count it may
    index = StoreTextIndex(store)
    # 200 lines of another day: one line more stays within the 1% the counts are kept for.
    older = Group(DAILY, "2026-01-01", "archived")
    index.write(older, [row_of(n, f"line {n} of the day") for n in range(1, 201)], [], None)
    daily = DailyLog(tmp_path, index=index)
    daily.append(DAY, "a walk by the lake")
    assert daily.search("lake zebra", since=None, limit=5)[0].line_range == (1, 1)
    daily.append(DAY, "a zebra at the zoo")  # "zebra" was counted (none) a moment ago
    assert [h.excerpt for h in daily.search("zebra", since=None, limit=5)] == ["a zebra at the zoo"]


def test_the_daemon_looks_for_hand_edited_daily_files_every_few_seconds(
    store: Store, tmp_path: Path
) -> None:
    clock = [100.0]
    daily = DailyLog(
        tmp_path, index=StoreTextIndex(store), look_every=5.0, monotonic=lambda: clock[0]
    )
    daily.append(DAY, "tea with Anna")
    assert daily.search("tea", since=None, limit=5) != []  # the first search looks
    with (tmp_path / f"{DAY.isoformat()}.md").open("a") as file:
        file.write("coffee with Bruno\n")  # by hand
    clock[0] = 104.9
    assert daily.search("bruno", since=None, limit=5) == []
    clock[0] = 105.0  # five seconds after the last look
    assert [h.excerpt for h in daily.search("bruno", since=None, limit=5)] == ["coffee with Bruno"]


def test_a_start_stops_indexing_at_its_next_file_when_the_daemon_stops(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM during the first start after an upgrade (minutes of indexing, for years of
    notes) stops the daemon at once: the preparation gives up at its next file, and the
    next start goes on from there."""
    for n in range(20):
        (tmp_path / f"{DAY - timedelta(days=n)}.md").write_text(f"line of day {n}\n")
    memory = Memory(
        store,
        Substrate([]),
        DailyLog(tmp_path, index=StoreTextIndex(store)),
        Compost(tmp_path / "compost"),
        "default",
        ZoneInfo("Europe/Berlin"),
    )
    sync = FileRows.sync
    synced: list[str] = []

    def slow_sync(self: FileRows, *args: Any, **kw: Any) -> None:
        synced.append("file")
        if len(synced) == 3:
            memory.stopping.set()  # SIGTERM arrives while the third file is indexed
        sync(self, *args, **kw)

    monkeypatch.setattr(FileRows, "sync", slow_sync)
    memory.prepare_search()
    assert len(synced) == 3  # stopped after the file in hand, not after all twenty
    memory.stopping.clear()
    memory.prepare_search()  # the next start: the rest
    assert len(synced) == 20
