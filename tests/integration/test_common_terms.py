"""A query's common words do not choose the candidates (years of notes: a name in every line
its speaker says), but still rank them: the engine is asked only for the rarer terms."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from pathlib import Path

import pytest
from test_marks_store import insert, make_mark

from daemon.core.text_rows import MARKS, Candidate, Statistics
from daemon.files.daily import DailyLog
from daemon.search import daily as daily_search
from daemon.search import marks as mark_terms
from daemon.search.index import selective
from daemon.services.mark_search import MarkSearch
from daemon.store import Store, StoreTextIndex
from daemon.store.text_index import TextRows

DAY = date(2026, 4, 11)


def test_terms_held_by_more_rows_than_asked_for_do_not_choose() -> None:
    stats = Statistics(100, 500, {"anna": 90, "lake": 40, "swim": 3})
    assert selective(["anna", "lake", "swim", "absent"], stats, 50) == ["lake", "swim"]
    assert selective(["anna", "lake"], stats, 10) == ["lake"]  # all common: the rarest
    assert selective(["absent"], stats, 10) == []


class Recording(StoreTextIndex):
    """The store's index, remembering the terms each candidates query asked for."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.asked: list[list[str]] = []

    def candidates(
        self,
        layer: str,
        wanted: Sequence[str],
        limit: int,
        *,
        scope: str | None = None,
        since: str | None = None,
    ) -> list[Candidate]:
        self.asked.append(list(wanted))
        return super().candidates(layer, wanted, limit, scope=scope, since=since)


def test_daily_lines_are_chosen_by_rare_terms_and_ranked_by_all(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daily_search, "CANDIDATES", 3)
    index = Recording(store)
    daily = DailyLog(tmp_path, index=index)
    for line in ("Ben: pebble", "Anna: lake", "Anna: tea", "Anna: bread", "Anna: pebble"):
        daily.append(DAY, line)
    found = daily.search("Anna pebble", since=None, limit=1)
    assert index.asked[-1] == ["pebbl"]  # "anna", in four lines of five, chose nothing
    assert found[0].line_range == (5, 5)  # …but still ranks: both words beat one


def test_marks_are_chosen_by_rare_terms(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mark_terms, "CHOOSING", 2)
    monkeypatch.setattr("daemon.services.mark_search.CHOOSING", 2)
    for n, text in enumerate(("walked the dog", "fed the dog", "dog and kettle")):
        insert(store, make_mark(f"mk_{n}", f"user.pets.n{n}", observation=text))
    marks = MarkSearch()
    marks.index(store)
    asked: list[list[str]] = []
    original = TextRows.candidates

    def recording(self: TextRows, layer: str, wanted: Sequence[str], *args, **kw):  # type: ignore[no-untyped-def]
        if layer == MARKS:
            asked.append(list(wanted))
        return original(self, layer, wanted, *args, **kw)

    monkeypatch.setattr(TextRows, "candidates", recording)
    assert store.read_sync(lambda tx: marks.search(tx, "w", "dog kettle")) == ["mk_2"]
    assert asked == [["kettl"]]
