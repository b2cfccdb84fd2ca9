"""A recall while the daemon brings the index up to date (at its start: a minute over three
years of notes, or the first start after an import) answers at once from what is indexed so
far: it waits for neither the marks' indexing nor a build, reading only a few changed files
itself; and a note waits for one file of the start's pass, not all of it. Measured before:
58 s for the first free-text recall and 30 s for a note after importing three years."""

from __future__ import annotations

import threading
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import structlog
from test_recall import T0, memory, vegetables  # noqa: F401 (the fixture)

from daemon.files.compost import Compost
from daemon.files.daily import DailyLog
from daemon.files.hand_edits import HandEdits
from daemon.files.substrate import Substrate
from daemon.schema.recall import RecallQuery
from daemon.services import mark_search
from daemon.services import recall as recall_module
from daemon.services.recall import Memory, recall
from daemon.services.recall_result import RecallResult
from daemon.store import Store, StoreTextIndex


def recalled_within(of: Memory, about: str, seconds: float) -> RecallResult | None:
    answers: list[RecallResult] = []
    asking = threading.Thread(
        target=lambda: answers.append(recall(RecallQuery(about=about), of, T0)), daemon=True
    )
    asking.start()
    asking.join(seconds)
    return answers[0] if answers else None


def test_a_recall_while_the_start_prepares_answers_from_what_is_indexed_so_far(
    memory: Memory,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    vegetables(memory)  # a mark queued for the text index
    memory.preparing.set()  # as the daemon does before it serves
    # The start's preparation, held in its first step (the marks' indexing).
    with memory.mark_search._indexing:
        preparing = threading.Thread(target=memory.prepare_search)
        preparing.start()
        # More files to read than a recall reads itself: a build, left to the start.
        monkeypatch.setattr(recall_module, "READ_IN_A_RECALL", 0)
        answer = recalled_within(memory, "Arnold recommended", 5)
        assert answer is not None, "the recall waited for the start's preparation"
        assert [m.mark.id for m in answer.marks] == ["m1"]  # ranked from the queue
        answer = recalled_within(memory, "morning pages", 5)
        assert answer is not None and answer.daily == []  # (nothing indexed yet)
        # A few (days written while the daemon was down): the recall reads them.
        monkeypatch.undo()
        answer = recalled_within(memory, "morning pages", 5)
        assert answer is not None and [hit.line_range for hit in answer.daily] == [(1, 1)]
    preparing.join()
    assert memory.prepared.is_set() and not memory.preparing.is_set()


def test_a_look_that_could_not_be_taken_stays_due_under_a_watch() -> None:
    now = [0.0]
    edits = HandEdits(look_every=10.0, monotonic=lambda: now[0])
    edits.watched(True)
    assert edits.take_look()
    assert not edits.take_look()  # watched, nothing changed, and too soon
    edits.look_again()
    assert edits.take_look()
    now[0] += 60
    assert not edits.take_look()  # watched: only a change calls for one


def test_a_note_during_a_look_at_every_file_waits_for_one_file_not_the_whole_look(
    tmp_path: Path,
) -> None:
    """The look that starts the daemon on years of files not indexed yet took a minute, and
    a note (or a consolidation) waited for all of it: 30 s measured. Now they wait for one
    file; what they did is seen by the look as they left it, each line indexed once."""
    directory = tmp_path / "daily"
    directory.mkdir()
    days = [date(2026, 4, 9), date(2026, 4, 10), date(2026, 4, 11)]
    for n, day in enumerate(days):
        (directory / f"{day}.md").write_text(f"walked along the river {n}\nline{n} alone\n")
    daily = DailyLog(directory)
    first_file, go_on = threading.Event(), threading.Event()

    def held(*_: int) -> None:
        first_file.set()
        assert go_on.wait(30)

    looking = threading.Thread(target=daily.refresh, args=(held,))
    looking.start()
    try:
        assert first_file.wait(10)
        writing = threading.Thread(
            target=lambda: (daily.append(days[2], "noted during the look"), daily.claim(days[1]))
        )
        writing.start()
        writing.join(5)
        assert not writing.is_alive(), "the note waited for the whole look"
    finally:
        go_on.set()
        looking.join()
    for word, day in (("line0", days[0]), ("line1", days[1]), ("noted", days[2])):
        assert [h.date for h in daily._index.search(word, since=None, limit=10)] == [str(day)]
    assert len(daily._index.search("river", since=None, limit=10)) == 3


def test_a_recall_that_finds_years_to_read_answers_at_once_and_the_daemon_catches_up(
    memory: Memory,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three years imported into a running daemon: its next recall read and indexed them
    all itself, 60 s. Now it answers from what is indexed, and the index catches up in the
    background as at the start (health: "preparing" until it is done)."""
    memory.prepare_search()  # a running daemon: its start's preparation is done
    assert memory.prepared.is_set()
    monkeypatch.setattr(recall_module, "READ_IN_A_RECALL", 1)  # (20 files: here, 1)
    directory = memory.daily.directory
    for day in ("2023-05-01", "2023-05-02", "2023-05-03"):  # what an import writes
        (directory / f"{day}.md").write_text(f"moved to Lisbon on {day}\n")
    with memory.mark_search._indexing:  # the catch-up's first step, held
        answer = recalled_within(memory, "Lisbon", 5)
        assert answer is not None, "the recall read the imported years itself"
        assert answer.daily == []  # (not indexed yet)
        assert memory.preparing.is_set() and not memory.prepared.is_set()
    assert memory.prepared.wait(10), "the catch-up did not finish"
    assert not memory.preparing.is_set()
    found = recall(RecallQuery(about="Lisbon", horizon="all"), memory, T0)
    assert sorted(hit.date for hit in found.daily) == ["2023-05-01", "2023-05-02", "2023-05-03"]


def test_a_recall_indexes_one_chunk_of_queued_marks_and_leaves_the_rest_to_a_catch_up(
    memory: Memory,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hundred thousand marks imported into a running daemon were all indexed by the next
    recall, inline. Now it indexes one chunk and asks for a catch-up; what is still queued
    is ranked in memory meanwhile (up to a chunk of it), as while the start prepares."""
    memory.prepare_search()
    monkeypatch.setattr(mark_search, "CHUNK", 1)
    for n in range(3):
        vegetables(memory, f"m{n}")  # queued for the text index
    asked: list[bool] = []
    monkeypatch.setattr(memory, "catch_up", lambda: asked.append(True))
    answer = recall(RecallQuery(about="Arnold recommended"), memory, T0)
    assert asked == [True]
    assert memory.store.read_sync(lambda tx: tx.text_index.count_pending()) == 2
    # The one indexed, and of the queue what a search ranks in memory (a chunk: here one).
    assert sorted(m.mark.id for m in answer.marks) == ["m0", "m1"]


def test_the_cli_with_the_daemon_down_still_says_the_daily_index_is_not_current(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With more changed files than a recall reads itself, the CLI (which reads none: it
    never writes the index) no longer said that the index is not current."""
    monkeypatch.setattr(recall_module, "READ_IN_A_RECALL", 1)
    directory = tmp_path / "daily"
    directory.mkdir()
    for day in ("2023-05-01", "2023-05-02", "2023-05-03"):
        (directory / f"{day}.md").write_text(f"moved to Lisbon on {day}\n")
    reader = Store(store.url)  # never started: the CLI's read-only store
    try:
        memory = Memory(
            store=reader,
            substrate=Substrate([]),
            daily=DailyLog(directory, index=StoreTextIndex(reader)),
            compost=Compost(tmp_path / "compost"),
            workspace="w",
            zone=ZoneInfo("Europe/Berlin"),
        )
        with structlog.testing.capture_logs() as logs:
            recall(RecallQuery(about="Lisbon", layers=["daily"]), memory, T0)
        warned = [(e["layer"], e["files"]) for e in logs if e["log_level"] == "warning"]
        assert warned == [("daily", 3)]
        assert not memory.preparing.is_set()  # (only the daemon catches up)
    finally:
        reader.close()
