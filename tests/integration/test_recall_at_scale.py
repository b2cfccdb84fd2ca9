"""Recall over years of notes: a query's common words do not choose the candidates (a name is
in every line its speaker says) but still rank them; common terms' counts are kept, a new
word's never; the daemon looks for hand-edited daily files now and then, not at every
recall."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import date, timedelta
from functools import partial
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio
import pytest
import structlog
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from support import T0
from test_marks_store import insert, make_mark

from daemon import process
from daemon.core.text_rows import DAILY, MARKS, Group, Statistics
from daemon.files.compost import Compost
from daemon.files.daily import DailyLog
from daemon.files.file_rows import FileRows
from daemon.files.substrate import Substrate
from daemon.schema.recall import RecallQuery
from daemon.search import daily as daily_search
from daemon.search.index import row_of, selective
from daemon.services.mark_search import MarkSearch
from daemon.services.recall import Memory, recall
from daemon.store import Store, StoreTextIndex, Tx, text_index
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
    original = TextRows._candidates

    def candidates(
        self: TextRows, fields: str, of: str, wanted: Sequence[str], *args: Any, **kw: Any
    ) -> Any:
        if of == layer:
            asked.append(list(wanted))
        return original(self, fields, of, wanted, *args, **kw)

    monkeypatch.setattr(TextRows, "_candidates", candidates)
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


def test_a_watched_daily_directory_is_looked_at_only_after_its_watch_saw_a_change(
    store: Store, tmp_path: Path
) -> None:
    """A look stats every file (11 ms of CPU at three years of notes): with the directory
    watched, a recall after a pause does not pay it unless a file changed, and the daily
    log's own appends (indexed as it writes them) are no such change."""
    clock = [100.0]
    daily = DailyLog(
        tmp_path, index=StoreTextIndex(store), look_every=5.0, monotonic=lambda: clock[0]
    )
    daily.append(DAY, "tea with Anna")
    daily.hand_edits.watched(True)  # set: what changed before it is looked for once
    day_file = tmp_path / f"{DAY.isoformat()}.md"
    with day_file.open("a") as file:
        file.write("coffee with Bruno\n")  # by hand, before the watch was set
    assert excerpts(daily, "bruno") == ["coffee with Bruno"]
    with day_file.open("a") as file:
        file.write("cake with Clara\n")  # by hand, and (here) not told by the watch
    clock[0] = 200.0
    assert excerpts(daily, "clara") == []  # no look: nothing changed that it knows of
    daily.hand_edits.changed({day_file})
    assert excerpts(daily, "clara") == ["cake with Clara"]

    next_day = tmp_path / f"{(DAY + timedelta(days=1)).isoformat()}.md"
    next_day.write_text("figs with Fritz\n")  # by hand, not told
    daily.append(DAY, "eggs with Emil")
    daily.hand_edits.changed({day_file})  # the append, as its own watch would tell it
    clock[0] = 300.0
    assert excerpts(daily, "emil") == ["eggs with Emil"]
    assert excerpts(daily, "fritz") == []  # the append called for no look
    daily.hand_edits.changed({next_day})
    assert excerpts(daily, "fritz") == ["figs with Fritz"]

    with day_file.open("a") as file:
        file.write("dinner with Dora\n")
    daily.hand_edits.watched(False)  # the watch ended: a look every few seconds again
    clock[0] = 305.0
    assert excerpts(daily, "dora") == ["dinner with Dora"]


def excerpts(daily: DailyLog, query: str) -> list[str]:
    return [hit.excerpt for hit in daily.search(query, since=None, limit=5)]


def memory_of(store: Store, daily: Path, *, monotonic: Any = None) -> Memory:
    memory = Memory(
        store,
        Substrate([]),
        DailyLog(daily, index=StoreTextIndex(store)),
        Compost(daily / "compost"),
        "w",
        ZoneInfo("Europe/Berlin"),
    )
    if monotonic is not None:
        memory.monotonic = monotonic
    return memory


def test_a_start_stops_indexing_at_its_next_file_when_the_daemon_stops(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM during the first start after an upgrade (minutes of indexing, for years of
    notes) stops the daemon at once: the preparation gives up at its next file, and the
    next start goes on from there."""
    for n in range(20):
        (tmp_path / f"{DAY - timedelta(days=n)}.md").write_text(f"line of day {n}\n")
    memory = memory_of(store, tmp_path)
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
    assert not memory.prepared.is_set()  # health: "preparing"
    memory.stopping.clear()
    memory.prepare_search()  # the next start: the rest
    assert len(synced) == 20
    assert memory.prepared.is_set()


def test_a_recall_within_a_horizon_finds_exactly_the_lines_of_the_days_it_covers(
    store: Store,
) -> None:
    """The engine ranks only the window of ids the horizon's days hold: a day edited by hand
    long after (its rows numbered among the recent ones) is still left out, and every line
    of the covered days is still found."""
    index = StoreTextIndex(store)
    days = [(DAY - timedelta(days=n)).isoformat() for n in range(4)]  # newest first
    index.write(Group(DAILY, days[3], "archived"), [row_of(1, "lake at dawn")], [], None)
    index.write(Group(DAILY, days[1], "archived"), [row_of(1, "lake swim")], [], None)
    index.write(Group(DAILY, days[2], "archived"), [row_of(1, "lake by hand")], [], None)
    index.write(Group(DAILY, days[0], "live"), [row_of(n, "the lake") for n in (1, 2)], [], None)

    def found(since: date) -> list[tuple[str, int]]:
        return sorted(
            (c.source, c.part)
            for c in index.candidates(DAILY, ["lake"], 10, since=since.isoformat())
        )

    assert found(DAY - timedelta(days=1)) == [(days[1], 1), (days[0], 1), (days[0], 2)]
    assert found(DAY) == [(days[0], 1), (days[0], 2)]
    assert found(DAY + timedelta(days=1)) == []


def test_an_index_built_from_scratch_numbers_its_rows_oldest_day_first(
    store: Store, tmp_path: Path
) -> None:
    """As appends number them, so that a recall's recent days are a narrow window of ids."""
    archive = tmp_path / "archive"
    archive.mkdir()
    days = [DAY - timedelta(days=n) for n in range(12)]
    for day in days[2:]:
        (archive / f"{day.isoformat()}.md").write_text(f"archived {day}\n")
    (archive / f".{days[1].isoformat()}.md.incoming").write_text("claimed\n")
    for day in days[:2]:
        (tmp_path / f"{day.isoformat()}.md").write_text(f"live {day}\n")
    DailyLog(tmp_path, index=StoreTextIndex(store)).refresh()
    rows = text_index.rows
    numbered = store.read_sync(
        lambda tx: list(
            tx.connection.execute(
                select(rows.c.source, rows.c.state).where(rows.c.layer == DAILY).order_by(rows.c.id)
            )
        )
    )
    expected = [(day.isoformat(), "archived") for day in reversed(days[2:])]
    expected += [(days[1].isoformat(), "claimed"), (days[1].isoformat(), "live")]
    assert [tuple(row) for row in numbered] == [*expected, (days[0].isoformat(), "live")]


def test_the_start_counts_the_common_terms_so_that_no_recall_is_the_first_to(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(text_index, "_KEPT_FROM", 3)
    memory = memory_of(store, tmp_path)
    for line in ("Anna: tea", "Anna: lake", "Anna: bread", "Ben: lake"):
        memory.daily.append(DAY, line)
    counted: list[list[str]] = []
    count = TextRows._count

    def recording_count(self: TextRows, layer: str, terms: list[str]) -> dict[str, int]:
        counted.append(terms)
        return count(self, layer, terms)

    monkeypatch.setattr(TextRows, "_count", recording_count)
    memory.prepare_search()
    counted.clear()
    found = store.read_sync(lambda tx: tx.text_index.statistics(DAILY, ["anna", "lake"]))
    if store.dialect == "sqlite":
        assert counted == [["lake"]]  # "anna", in three lines, was counted by the start
    assert found.frequencies == {"anna": 3, "lake": 2}


def test_a_recall_indexes_the_marks_queue_after_a_write_of_its_own_or_a_second(
    store: Store, tmp_path: Path
) -> None:
    """A recall takes no write transaction for an empty queue; what another process queued
    is found meanwhile all the same (a recall ranks the queue)."""
    clock = [50.0]
    memory = memory_of(store, tmp_path, monotonic=lambda: clock[0])
    query = RecallQuery(about="kettle", layers=["marks"], workspace="w")
    assert recall(query, memory, T0).marks == []
    insert(store, make_mark("mk_other", "user.home.kettle"))  # another process's write
    clock[0] = 50.5
    assert [h.mark.id for h in recall(query, memory, T0).marks] == ["mk_other"]  # the queue
    assert store.read_sync(lambda tx: tx.text_index.count_pending()) == 1  # not indexed yet
    clock[0] = 51.0  # a second after the last look
    assert [h.mark.id for h in recall(query, memory, T0).marks] == ["mk_other"]
    assert store.read_sync(lambda tx: tx.text_index.count_pending()) == 0
    own = make_mark("mk_own", "user.office.kettle")
    anyio.run(partial(store.write, lambda tx: tx.marks.insert([own])))  # this daemon's writer
    clock[0] = 51.1
    assert sorted(h.mark.id for h in recall(query, memory, T0).marks) == ["mk_other", "mk_own"]
    assert store.read_sync(lambda tx: tx.text_index.count_pending()) == 0  # indexed at once


@asynccontextmanager
async def looking_for_stored_marks(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[None]:
    """The daemon's look for the marks its writer stored, every 10 ms, while inside."""
    monkeypatch.setattr(process, "MARKS_LOOK", 0.01)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(process.index_stored_marks, memory)
        yield
        tasks.cancel_scope.cancel()


async def until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not condition():  # noqa: ASYNC110 (the store has no event for it)
            await anyio.sleep(0.01)


@pytest.mark.asyncio
async def test_the_daemon_indexes_the_marks_it_stored_without_waiting_for_a_recall(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With semantic recall on, indexing them is what wakes the embedding worker for them."""
    memory = memory_of(store, tmp_path)

    def pending() -> int:
        return store.read_sync(lambda tx: tx.text_index.count_pending())

    async with looking_for_stored_marks(memory, monkeypatch):
        await store.write(lambda tx: tx.marks.insert([make_mark("mk_a", "user.home.kettle")]))
        await anyio.sleep(0.1)
        assert pending() == 1  # the start's preparation is not done: it indexes them
        memory.prepared.set()
        await until(lambda: pending() == 0)


def test_two_processes_index_the_marks_queue_at_once_without_colliding(store: Store) -> None:
    """A fleet's daemons index the queue at once: each takes marks no other is indexing
    (PostgreSQL: claimed with SKIP LOCKED), instead of both writing the same marks' rows."""
    insert(store, *(make_mark(f"mk_{n}", f"user.n{n}", observation="tea") for n in range(3)))
    claimed, release = threading.Event(), threading.Event()
    first: list[int] = []

    def hold_a_claim(tx: Tx) -> None:
        taken = tx.text_index.pending_marks(2, claim=True)
        claimed.set()
        assert release.wait(10)
        rows = [row_of(0, mark.observation) for mark in taken]
        tx.text_index.indexed_marks(taken, rows)
        first.append(len(taken))

    holder = threading.Thread(target=store.write_sync, args=(hold_a_claim,))
    holder.start()
    try:
        assert claimed.wait(10)
        if store.dialect == "postgresql":  # SQLite has one writer: the other waits its turn
            assert MarkSearch().index(store) == 1  # the one mark not claimed
    finally:
        release.set()
        holder.join(10)
    assert first == [2]
    MarkSearch().index(store)
    sources = store.read_sync(lambda tx: tx.text_index.candidate_sources(MARKS, ["tea"], 10))
    assert sorted(sources) == ["mk_0", "mk_1", "mk_2"]


@pytest.mark.asyncio
async def test_indexing_the_stored_marks_survives_a_store_failure(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed look is logged and the next one tries again: the daemon keeps running."""
    memory = memory_of(store, tmp_path)
    memory.prepared.set()
    calls: list[str] = []

    async def index_stored_marks() -> None:
        calls.append("index")
        if len(calls) == 1:
            raise OperationalError("DELETE", {}, Exception("database is locked"))

    monkeypatch.setattr(memory, "index_stored_marks", index_stored_marks)
    with structlog.testing.capture_logs() as logs:
        async with looking_for_stored_marks(memory, monkeypatch):
            for n in range(2):
                await store.write(lambda tx, n=n: tx.marks.insert([make_mark(f"mk_{n}", "u.a")]))
                await until(lambda n=n: len(calls) > n)
    assert [line["event"] for line in logs] == ["indexing the stored marks failed"]
