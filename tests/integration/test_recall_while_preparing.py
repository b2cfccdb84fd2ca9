"""A recall while the daemon brings the index up to date (at its start: a minute over three
years of notes, or the first start after an import) answers at once from what is indexed so
far: it waits for neither the marks' indexing nor a build, reading only a few changed files
itself; and a note waits for one file of the start's pass, not all of it. Measured before:
58 s for the first free-text recall and 30 s for a note after importing three years."""

from __future__ import annotations

import threading
from datetime import date
from pathlib import Path

import pytest
from test_recall import T0, memory, vegetables  # noqa: F401 (the fixture)

from daemon.files.daily import DailyLog
from daemon.files.hand_edits import HandEdits
from daemon.schema.recall import RecallQuery
from daemon.services import recall as recall_module
from daemon.services.recall import Memory, RecallResult, recall


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
        monkeypatch.setattr(recall_module, "LOOK_WHILE_PREPARING", 0)
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
