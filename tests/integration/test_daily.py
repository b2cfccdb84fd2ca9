"""The daily log: strict day names, durable appends, archives that never lose or repeat a
line (whatever crashes or interleaves), and ranked search with adjacent lines merged."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog
from disk import Crash, Disk
from support import merge_half_done

from daemon import fs
from daemon.core.days import InvalidDay, parse_day
from daemon.files.daily import DailyLog
from daemon.files.daily_merge import Claim
from daemon.fs import Folder
from daemon.search.daily import DailyHit, _spans, _with_neighbours

DAY = date(2026, 4, 11)


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "daily"


@pytest.fixture
def daily(directory: Path) -> DailyLog:
    return DailyLog(directory)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def leftovers(directory: Path) -> list[str]:
    """Files an archive run could leave behind: anything hidden."""
    return sorted(p.name for p in directory.rglob(".*"))


# -- days --------------------------------------------------------------------------------


def test_a_day_is_a_real_calendar_date_written_yyyy_mm_dd() -> None:
    assert parse_day("2026-04-11") == DAY
    assert parse_day("2024-02-29") == date(2024, 2, 29)


@pytest.mark.parametrize(
    "value",
    [
        "../../etc/passwd",
        "2026-02-30",
        "2026-4-1",
        "2026-04-01.md",
        " 2026-04-01",
        "2026-04-01\n",
        "2026/04/01",
        "0000-01-01",
        "\uff12\uff10\uff12\uff16-04-01",  # fullwidth digits
        "",
    ],
)
def test_anything_else_is_refused_with_a_clear_error(value: str) -> None:
    with pytest.raises(InvalidDay) as refused:
        parse_day(value)
    assert repr(value) in str(refused.value)
    assert "YYYY-MM-DD" in str(refused.value)
    assert isinstance(refused.value, ValueError)


def test_days_lists_only_files_named_by_a_day(directory: Path, daily: DailyLog) -> None:
    for name in ["2026-04-10.md", "2026-04-09.md", "notes.md", "2026-02-30.md", "2026-04-11.txt"]:
        write(directory / name, "x\n")
    write(directory / "archive" / "2026-03-01.md", "x\n")
    write(directory / "archive" / ".2026-03-02.md.incoming", "x\n")
    (directory / "2026-04-08.md").symlink_to(directory / "2026-04-09.md")
    assert daily.days(archived=False) == [date(2026, 4, 9), date(2026, 4, 10)]
    assert daily.days(archived=True) == [date(2026, 3, 1)]
    assert DailyLog(directory / "missing").days(archived=False) == []


def test_unconsolidated_days_are_live_files_and_unmerged_claims(
    directory: Path, daily: DailyLog
) -> None:
    write(directory / "2026-04-10.md", "x\n")
    write(directory / "2026-04-12.md", "not yet: after the day asked about\n")
    write(directory / "archive" / "2026-04-01.md", "consolidated\n")
    write(directory / "archive" / ".2026-04-02.md.incoming", "claimed, not merged\n")
    # Hidden files that are not claims, however close their names come.
    for name in [".2026-04-03", ".2026-04-04.md", ".2026-04-05.md.merge", "2026-04-06.md.incoming"]:
        write(directory / "archive" / name, "x\n")
    for n in range(20):
        write(directory / "archive" / f".not-a-day-{n}.md.incoming", "x\n")
    assert daily.unconsolidated_days(date(2026, 4, 11)) == [date(2026, 4, 2), date(2026, 4, 10)]


# -- reading and appending ---------------------------------------------------------------


def test_append_creates_the_file_and_ends_every_line_with_a_newline(
    directory: Path, daily: DailyLog
) -> None:
    assert daily.read(DAY) is None
    daily.append(DAY, "Obadiah logged a completed action.")
    daily.append(DAY, "Second line, with ünïcode.")
    assert (directory / "2026-04-11.md").read_text(encoding="utf-8") == (
        "Obadiah logged a completed action.\nSecond line, with ünïcode.\n"
    )
    assert daily.read(DAY) == ["Obadiah logged a completed action.", "Second line, with ünïcode."]


def test_append_to_a_file_without_a_final_newline_starts_a_new_line(
    directory: Path, daily: DailyLog
) -> None:
    write(directory / "2026-04-11.md", "Written by hand")
    daily.append(DAY, "Appended.")
    assert daily.read(DAY) == ["Written by hand", "Appended."]


@pytest.mark.parametrize("line", ["two\nlines", "carriage\rreturn", "trailing\n"])
def test_append_refuses_a_line_break(directory: Path, daily: DailyLog, line: str) -> None:
    with pytest.raises(ValueError) as refused:
        daily.append(DAY, line)
    assert str(refused.value) == "a daily line must not contain a line break"
    assert not (directory / "2026-04-11.md").exists()


def test_lines_are_numbered_as_an_editor_shows_them(directory: Path, daily: DailyLog) -> None:
    write(directory / "2026-04-11.md", "one\r\ntwo\u2028still two\n\nfour\n")
    assert daily.read(DAY) == ["one", "two\u2028still two", "", "four"]


def test_bytes_that_are_not_utf8_read_as_replacement_characters(
    directory: Path, daily: DailyLog
) -> None:
    (directory / "2026-04-11.md").parent.mkdir(parents=True)
    (directory / "2026-04-11.md").write_bytes(b"caf\xe9 latte\nok\n")
    assert daily.read(DAY) == ["caf\ufffd latte", "ok"]


def test_path_names_the_live_and_the_archived_file(directory: Path, daily: DailyLog) -> None:
    assert daily.path(DAY) == directory / "2026-04-11.md"
    assert daily.path(DAY, archived=True) == directory / "archive" / "2026-04-11.md"


def test_reading_creates_nothing(directory: Path, daily: DailyLog) -> None:
    assert daily.read(DAY) is None
    assert daily.read(DAY, archived=True) is None
    assert daily.position(DAY) == 0
    assert not directory.exists()
    write(directory / "2026-04-10.md", "x\n")
    assert daily.read(DAY, archived=True) is None
    assert daily.position(DAY) == 0
    daily.archive(DAY)  # nothing to archive: no archive folder either
    assert sorted(p.name for p in directory.iterdir()) == ["2026-04-10.md"]


def test_an_append_given_a_position_is_made_once(directory: Path, daily: DailyLog) -> None:
    """A redelivered note passes the position it saw first: its line is appended unless the
    day already holds it after that position."""
    daily.append(DAY, "coffee")
    seen = daily.position(DAY)
    assert daily.append(DAY, "coffee", unless_after=seen) is True  # a line before does not count
    assert daily.append(DAY, "coffee", unless_after=seen) is False  # the retry
    daily.archive(DAY)
    assert daily.append(DAY, "coffee", unless_after=seen) is False  # archived since
    assert daily.append(DAY, "tea", unless_after=seen) is True
    assert daily.position(DAY) == 3
    assert [*(daily.read(DAY, archived=True) or []), *(daily.read(DAY) or [])] == [
        "coffee",
        "coffee",
        "tea",
    ]


# -- archiving ---------------------------------------------------------------------------


def test_archive_moves_the_day_into_the_archive(directory: Path, daily: DailyLog) -> None:
    daily.append(DAY, "Yesterday content.")
    daily.archive(DAY)
    assert not (directory / "2026-04-11.md").exists()
    assert (directory / "archive" / "2026-04-11.md").read_text() == "Yesterday content.\n"
    assert daily.read(DAY, archived=True) == ["Yesterday content."]
    assert daily.position(DAY) == 1
    assert leftovers(directory) == []


def test_archive_into_an_archived_day_appends_and_loses_no_line(
    directory: Path, daily: DailyLog
) -> None:
    write(directory / "archive" / "2026-04-11.md", "first\nsecond without newline")
    write(directory / "2026-04-11.md", "third\nfourth")
    assert daily.position(DAY) == 4  # archived and live lines, seen whole
    daily.archive(DAY)
    assert daily.read(DAY, archived=True) == ["first", "second without newline", "third", "fourth"]
    assert daily.read(DAY) is None
    daily.append(DAY, "fifth")
    daily.archive(DAY)
    assert daily.read(DAY, archived=True) == [
        "first",
        "second without newline",
        "third",
        "fourth",
        "fifth",
    ]
    assert leftovers(directory) == []


def test_archive_without_a_live_file_changes_nothing(directory: Path, daily: DailyLog) -> None:
    daily.archive(DAY)
    assert not directory.exists()
    write(directory / "archive" / "2026-04-11.md", "kept\n")
    daily.archive(DAY)
    assert daily.read(DAY, archived=True) == ["kept"]


@pytest.mark.parametrize(
    ("archived", "live", "expected"),
    [
        ("", "l1\n", ["l1"]),  # an archived file left empty
        ("a1\n", "", ["a1"]),  # an empty live file adds nothing
        ("", "", []),
    ],
)
def test_archive_with_empty_files_adds_exactly_their_lines(
    directory: Path, daily: DailyLog, archived: str, live: str, expected: list[str]
) -> None:
    write(directory / "archive" / "2026-04-11.md", archived)
    write(directory / "2026-04-11.md", live)
    daily.archive(DAY)
    assert (directory / "archive" / "2026-04-11.md").read_text() == "".join(
        f"{line}\n" for line in expected
    )
    assert leftovers(directory) == []


# -- crashes: a power cut at any step loses nothing that was acknowledged -----------------


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Disk:
    disk = Disk(tmp_path)
    disk.install(monkeypatch)
    return disk


CrashAt = Callable[..., None]


@pytest.fixture
def crash_at(disk: Disk) -> Iterator[CrashAt]:
    """``crash_at(n)`` cuts the power at the n-th file-system step from now on (a rename,
    replace, unlink or fsync; or only those named in ``steps``): before it happens, or with
    ``after=True`` right after it. Whatever was not fsynced by then is undone, as after a
    real power cut. ``crash_at(0)`` disarms and brings the disk back."""
    yield disk.crash_at
    disk.crash_at(0)


ARCHIVED = "a1\na2\n"
LIVE = "l1\nl2\nl3\n"
ALL_LINES = ["a1", "a2", "l1", "l2", "l3"]
WHEN = pytest.mark.parametrize("after", [False, True], ids=["before-a-step", "after-a-step"])


@WHEN
@pytest.mark.parametrize("archived_before", [True, False], ids=["into-archive", "fresh"])
def test_archive_retried_after_a_crash_at_any_step_keeps_every_line_once(
    tmp_path: Path, crash_at: CrashAt, archived_before: bool, after: bool
) -> None:
    expected = ALL_LINES if archived_before else ALL_LINES[2:]
    crashes = 0
    for step in range(1, 100):
        directory = tmp_path / f"run-{step}" / "daily"
        if archived_before:
            write(directory / "archive" / "2026-04-11.md", ARCHIVED)
        write(directory / "2026-04-11.md", LIVE)
        daily = DailyLog(directory)
        crash_at(step, after=after)
        try:
            daily.archive(DAY)
        except Crash:
            crashes += 1
        else:
            break
        finally:
            crash_at(0)
        # Each line is still live or (on its way into the) archive, exactly once ...
        assert daily.position(DAY) == len(expected), f"crash at step {step}"
        # ... and after a retry (or two), each is in the archive once.
        daily.archive(DAY)
        daily.archive(DAY)
        assert daily.read(DAY, archived=True) == expected, f"crash at step {step}"
        assert daily.read(DAY) is None
        assert leftovers(directory) == []
    # The loop stops at the first run no crash interrupted, so every step before it crashed.
    assert crashes >= (8 if archived_before else 3)


@WHEN
def test_a_power_cut_loses_no_acknowledged_append(
    tmp_path: Path, crash_at: CrashAt, after: bool
) -> None:
    """Every append that returned is still there after a power cut at any step, whole; the
    one the cut interrupted is there whole or not at all."""
    lines = ["first", "second", "third"]
    crashes = 0
    for step in range(1, 100):
        daily = DailyLog(tmp_path / f"run-{step}" / "daily")
        acknowledged: list[str] = []
        crash_at(step, after=after)
        try:
            for line in lines:
                daily.append(DAY, line)
                acknowledged.append(line)
        except Crash:
            crashes += 1
        finally:
            crash_at(0)
        kept = daily.read(DAY) or []
        assert kept in (acknowledged, lines[: len(acknowledged) + 1]), f"crash at step {step}"
        if acknowledged == lines:
            break
    # Making the directories, creating the file, and one fsync per line: each crashed once.
    assert crashes >= 6


@pytest.mark.parametrize("archived_before", [True, False], ids=["into-archive", "fresh"])
def test_an_archive_that_returned_survives_a_power_cut(
    directory: Path, daily: DailyLog, disk: Disk, archived_before: bool
) -> None:
    if archived_before:
        write(directory / "archive" / "2026-04-11.md", ARCHIVED)
    write(directory / "2026-04-11.md", LIVE)
    disk.settle()
    daily.archive(DAY)
    disk.power_cut()
    disk.crash_at(0)
    assert daily.read(DAY, archived=True) == (ALL_LINES if archived_before else ALL_LINES[2:])
    assert daily.read(DAY) is None
    assert leftovers(directory) == []


def test_every_append_claim_and_merge_is_fsynced_before_it_returns(
    daily: DailyLog, disk: Disk
) -> None:
    """The fsync spy: once a call returns, no byte it wrote and no file it created, renamed
    or removed is waiting for an fsync."""
    daily.append(DAY, "first")  # creates the directory and the file
    assert disk.unsynced() == []
    daily.append(DAY, "second")
    assert disk.unsynced() == []
    assert daily.claim(DAY) is not None  # creates the archive, moves the file into it
    assert disk.unsynced() == []
    daily.merge(DAY)  # into a day not archived yet
    assert disk.unsynced() == []
    daily.append(DAY, "third")
    assert daily.claim(DAY) is not None
    daily.merge(DAY)  # into an archived day: a record, an append, two removals
    assert disk.unsynced() == []
    assert daily.read(DAY, archived=True) == ["first", "second", "third"]


def test_an_append_that_fails_halfway_is_cut_back_durably(
    directory: Path, daily: DailyLog, disk: Disk, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails halfway (a full disk) leaves the file as it was, and that is on
    the disk when the error reaches the caller: no half line reappears after a power cut."""
    daily.append(DAY, "before")

    def full_disk(fd: int, data: bytes) -> None:
        os.write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fs, "_write_all", full_disk)
    with pytest.raises(OSError, match="No space left"):
        daily.append(DAY, "a line the disk has no room for")
    assert disk.unsynced() == []
    disk.power_cut()
    disk.crash_at(0)
    assert daily.read(DAY) == ["before"]


def test_an_append_cut_short_by_a_crash_is_completed_not_repeated(
    tmp_path: Path, crash_at: CrashAt
) -> None:
    for step in range(1, 100):
        directory = tmp_path / f"run-{step}" / "daily"
        archive = write(directory / "archive" / "2026-04-11.md", ARCHIVED)
        write(directory / "2026-04-11.md", LIVE)
        daily = DailyLog(directory)
        crash_at(step)
        try:
            daily.archive(DAY)
        except Crash:
            pass
        else:
            pytest.fail("the append was never reached")
        finally:
            crash_at(0)
        grown = archive.stat().st_size - len(ARCHIVED)
        if grown > 0:  # the crash came after the append: keep only part of it on disk
            os.truncate(archive, len(ARCHIVED) + grown // 2)
            daily.archive(DAY)
            assert daily.read(DAY, archived=True) == ALL_LINES
            assert leftovers(directory) == []
            return
    pytest.fail("no crash came after the append")


def test_a_day_appended_to_after_an_interrupted_archive_keeps_its_order(
    directory: Path, crash_at: CrashAt
) -> None:
    daily = DailyLog(directory)
    write(directory / "archive" / "2026-04-11.md", ARCHIVED)
    write(directory / "2026-04-11.md", LIVE)
    # The live file was just moved out of the way (both directories synced), not yet read.
    crash_at(2, steps=("fsync",), after=True)
    with pytest.raises(Crash):
        daily.archive(DAY)
    crash_at(0)
    assert daily.read(DAY) is None
    daily.append(DAY, "late note")
    assert daily.position(DAY) == 6  # the interrupted lines are still there, before it
    daily.archive(DAY)
    assert daily.read(DAY, archived=True) == [*ALL_LINES, "late note"]


def test_a_claim_tells_its_lines_where_they_go_and_whether_it_was_left_over(
    directory: Path, daily: DailyLog, crash_at: CrashAt
) -> None:
    write(directory / "archive" / "2026-04-11.md", ARCHIVED)
    write(directory / "2026-04-11.md", LIVE)
    crash_at(2, steps=("fsync",), after=True)  # claimed, then the power went
    with pytest.raises(Crash):
        daily.archive(DAY)
    crash_at(0)
    daily.append(DAY, "late")
    assert daily.claim(DAY) == Claim(DAY, ["l1", "l2", "l3"], offset=2, leftover=True)
    daily.merge(DAY)
    assert daily.claim(DAY) == Claim(DAY, ["late"], offset=5, leftover=False)


def test_an_archive_edited_by_hand_during_an_interrupted_merge_loses_no_line(
    directory: Path, daily: DailyLog, crash_at: CrashAt
) -> None:
    """The merge recorded the archive's size, then the power went; before the retry a person
    adds a line to the archived day. Nothing an interrupted run explains: every line is
    kept (the claim's may repeat), and the log says so."""
    archive = write(directory / "archive" / "2026-04-11.md", ARCHIVED)
    write(directory / "2026-04-11.md", LIVE)
    # Claimed (two fsyncs), the record written (one) and in place, durably (the fourth).
    crash_at(4, steps=("fsync",), after=True)
    with pytest.raises(Crash):
        daily.archive(DAY)
    crash_at(0)
    with archive.open("a") as file:
        file.write("added by hand\n")
    with structlog.testing.capture_logs() as logs:
        daily.archive(DAY)
    assert daily.read(DAY, archived=True) == [*ARCHIVED.split(), "added by hand", "l1", "l2", "l3"]
    assert leftovers(directory) == []
    assert logs == [
        {
            "event": "daily archive changed during a merge",
            "day": "2026-04-11",
            "log_level": "warning",
        }
    ]


# -- concurrency: appends, claims and merges never interleave ----------------------------

# How long a thread may take to get where the test sends it: a bound against hanging, not
# a measure of speed (a correct run waits for no timeout).
PATIENCE = 30.0


class ReportingLock:
    """The log's lock, telling the test when a thread has to wait for it."""

    def __init__(self, lock: Any, waiting: threading.Event) -> None:
        self._lock, self._waiting = lock, waiting

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            self._waiting.set()
            self._lock.acquire()

    def __exit__(self, *_: object) -> None:
        self._lock.release()


def interleave(
    monkeypatch: pytest.MonkeyPatch,
    daily: DailyLog,
    owner: object,
    name: str,
    meanwhile: Callable[[], None],
) -> Callable[[], None]:
    """At the next call of ``owner.name``, first run ``meanwhile`` on another thread until
    it has finished or has to wait for the log's lock: the interleaving a missing lock
    allows, forced rather than hoped for. Returns a function that waits for that thread and
    raises what it raised."""
    settled = threading.Event()
    monkeypatch.setattr(daily, "_lock", ReportingLock(daily._lock, settled))
    original = getattr(owner, name)
    errors: list[BaseException] = []
    threads: list[threading.Thread] = []

    def other() -> None:
        try:
            meanwhile()
        except BaseException as exc:
            errors.append(exc)
        finally:
            settled.set()

    def step(*args: Any, **kwargs: Any) -> Any:
        if not threads:
            threads.append(threading.Thread(target=other))
            threads[0].start()
            assert settled.wait(PATIENCE), "the other thread neither finished nor waited"
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, step)

    def finish() -> None:
        assert threads, "the step to interleave at never came"
        threads[0].join(PATIENCE)
        assert not threads[0].is_alive(), "the other thread never finished"
        if errors:
            raise errors[0]

    return finish


def consolidate(daily: DailyLog) -> list[str]:
    """Finish what is pending, then claim and merge until nothing is left, as consolidation
    does; the lines claimed."""
    claimed = []
    daily.merge(DAY)
    while (claim := daily.claim(DAY)) is not None:
        claimed += claim.lines
        daily.merge(DAY)
    return claimed


def test_a_line_appended_while_the_day_is_claimed_is_claimed_once(
    directory: Path, daily: DailyLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append has opened the live file when a consolidation claims the day. Its line
    must be in that claim, or left for the next one; written into the claimed file after
    the claim read it, it would be archived without ever being consolidated."""
    write(directory / "2026-04-11.md", "l1\n")
    claimed: list[str] = []

    def claim() -> None:
        taken = daily.claim(DAY)
        assert taken is not None
        claimed.extend(taken.lines)

    finish = interleave(monkeypatch, daily, fs, "_write_all", claim)
    daily.append(DAY, "late")  # between opening the file and writing to it: the claim
    finish()
    assert claimed + consolidate(daily) == ["l1", "late"]
    assert daily.read(DAY, archived=True) == ["l1", "late"]


def test_two_claims_at_once_lose_no_line(
    directory: Path, daily: DailyLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim has found the live file and is about to move it away when another claim
    takes the day and a new line starts a new live file. The first must not move that new
    file over what the other one claimed."""
    write(directory / "2026-04-11.md", "l1\nl2\n")

    def claim_then_append() -> None:
        assert daily.claim(DAY) is not None
        daily.append(DAY, "late")

    finish = interleave(monkeypatch, daily, Folder, "move", claim_then_append)
    first = daily.claim(DAY)  # between looking at the live file and moving it: the other
    finish()
    assert first is not None and first.lines == ["l1", "l2"]
    consolidate(daily)
    assert daily.read(DAY, archived=True) == ["l1", "l2", "late"]
    assert leftovers(directory) == []


def test_two_merges_at_once_lose_no_line(
    directory: Path, daily: DailyLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge has found the day not archived yet and is about to move its claim into
    place when another merge does it first and a new claim takes the next live file. The
    first must not move that claim over the archived day."""
    write(directory / "2026-04-11.md", "l1\n")
    assert daily.claim(DAY) is not None
    daily.append(DAY, "late")

    def merge_then_claim() -> None:
        daily.merge(DAY)
        assert daily.claim(DAY) is not None

    finish = interleave(monkeypatch, daily, Folder, "move", merge_then_claim)
    daily.merge(DAY)  # between finding no archived day and moving the claim: the other
    finish()
    consolidate(daily)
    assert daily.read(DAY, archived=True) == ["l1", "late"]
    assert leftovers(directory) == []


def test_concurrent_appends_and_archives_lose_nothing(directory: Path, daily: DailyLog) -> None:
    lines = [f"line {n}" for n in range(300)]
    start = threading.Barrier(2)

    def append_all() -> None:
        start.wait()
        for line in lines:
            daily.append(DAY, line)

    def archive_often() -> None:
        start.wait()
        for _ in range(300):
            daily.archive(DAY)

    threads = [threading.Thread(target=append_all), threading.Thread(target=archive_often)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    daily.archive(DAY)
    assert daily.read(DAY, archived=True) == lines
    assert daily.read(DAY) is None


# -- evidence ----------------------------------------------------------------------------


def test_evidence_finds_lines_live_or_archived(directory: Path, daily: DailyLog) -> None:
    write(directory / "2026-04-11.md", "woke up\ncooked vegetables\nslept\n")
    write(directory / "archive" / "2026-04-10.md", "a\nb\nc\nd\n")
    assert daily.evidence("2026-04-11.md", (2, 3)) == DailyHit(
        "2026-04-11", "cooked vegetables\nslept", (2, 3), archived=False
    )
    assert daily.evidence("2026-04-10.md", (4, 4)) == DailyHit("2026-04-10", "d", (4, 4), True)
    assert daily.evidence("2026-04-10.md", (1, 1)) == DailyHit("2026-04-10", "a", (1, 1), True)
    assert daily.evidence("2026-04-10.md", (4, 5)) is None
    assert daily.evidence("2026-04-10.md", (0, 1)) is None
    assert daily.evidence("2026-04-09.md", (1, 1)) is None


def test_evidence_of_a_day_noted_again_after_its_archive_is_the_archives(
    directory: Path, daily: DailyLog
) -> None:
    """Consolidation numbers a mark's lines as the archive does; a line for the day written
    after it was archived starts a live file numbered from 1 again."""
    write(directory / "archive" / "2026-04-10.md", "had lunch with Bea\nOBS likes ramen\n")
    write(directory / "2026-04-10.md", "went for a run\ncalled mum\n")
    assert daily.evidence("2026-04-10.md", (2, 2)) == DailyHit(
        "2026-04-10", "OBS likes ramen", (2, 2), archived=True
    )
    assert daily.evidence("2026-04-10.md", (3, 3)) is None


@pytest.mark.parametrize("name", ["../../etc/passwd", "2026-04-11", "2026-02-30.md", "x.md"])
def test_evidence_refuses_a_file_that_is_not_a_day(daily: DailyLog, name: str) -> None:
    with pytest.raises(InvalidDay) as refused:
        daily.evidence(name, (1, 1))
    shown = name.removesuffix(".md") if name.endswith(".md") else name
    assert repr(shown) in str(refused.value)
    assert "YYYY-MM-DD" in str(refused.value)


# -- search ------------------------------------------------------------------------------


def test_adjacent_matching_lines_merge_into_one_hit(directory: Path, daily: DailyLog) -> None:
    write(
        directory / "2026-04-11.md",
        "Woke up.\n"
        "Arnold cooked vegetables at 180C.\n"
        "Vegetable timing: twenty minutes.\n"
        "Deep work.\n"
        "Bought more vegetables.\n",
    )
    hits = daily.search("user.food.vegetables", since=None, limit=10)
    assert sorted(hits, key=lambda hit: hit.line_range) == [
        DailyHit(
            "2026-04-11",
            "Arnold cooked vegetables at 180C.\nVegetable timing: twenty minutes.",
            (2, 3),
            archived=False,
        ),
        DailyHit("2026-04-11", "Bought more vegetables.", (5, 5), archived=False),
    ]


def test_a_subject_path_finds_the_lines_about_its_subtree_not_its_upper_segments(
    directory: Path, daily: DailyLog
) -> None:
    """Every observation about the user says ``user``: ``user.health`` must not bring the
    dentist and the book along with the shoulder."""
    write(
        directory / "2026-04-11.md",
        "OBS subject=user.health.shoulder left shoulder hurts after climbing\n"
        "OBS subject=user.appointments.dentist dentist on 14 January\n"
        "OBS subject=user.reading reading The Dispossessed\n"
        "health insurance letter came\n"
        "the user interface of the bank app is confusing\n",
    )
    found = [hit.line_range for hit in daily.search("user.health", since=None, limit=10)]
    assert sorted(found) == [(1, 1), (4, 4)]
    assert [h.line_range for h in daily.search("user.reading", since=None, limit=10)] == [(3, 3)]
    # a path whose last segment has no term (too short) falls back to the one above it
    found = [hit.line_range for hit in daily.search("user.health.x", since=None, limit=10)]
    assert sorted(found) == [(1, 1), (4, 4)]


def test_search_matches_whole_stemmed_words_only(directory: Path, daily: DailyLog) -> None:
    write(directory / "2026-04-11.md", "Sleepover at Anna's.\nx\nWent to sleep at 23:00.\n")
    hits = daily.search("sleeping", since=None, limit=10)
    assert [hit.line_range for hit in hits] == [(3, 3)]
    assert daily.search("the", since=None, limit=10) == []


def test_search_ranks_hits_and_is_bounded_by_the_limit(directory: Path, daily: DailyLog) -> None:
    write(
        directory / "2026-04-10.md",
        "\n\n".join(
            [
                "coffee",
                "coffee with oat milk in the morning",
                "espresso and coffee",
                "coffee after lunch",
            ]
        )
        + "\n",
    )
    hits = daily.search("espresso coffee", since=None, limit=10)
    assert hits[0].excerpt == "espresso and coffee"
    assert len(hits) == 4
    assert len(daily.search("espresso coffee", since=None, limit=2)) == 2
    assert daily.search("espresso coffee", since=None, limit=0) == []


def test_search_covers_live_files_and_archives_within_the_horizon(
    directory: Path, daily: DailyLog
) -> None:
    write(directory / "2026-04-11.md", "lunch with Anna\n")
    write(directory / "archive" / "2026-04-05.md", "lunch with Ben\n")
    write(directory / "archive" / "2026-03-01.md", "lunch with Carl\n")

    def dates(since: date | None) -> set[str]:
        return {hit.date for hit in daily.search("lunch", since=since, limit=10)}

    assert dates(None) == {"2026-04-11", "2026-04-05", "2026-03-01"}
    assert dates(date(2026, 4, 5)) == {"2026-04-11", "2026-04-05"}
    assert dates(date(2026, 4, 6)) == {"2026-04-11"}


def test_search_sees_appends_archives_and_edits(directory: Path, daily: DailyLog) -> None:
    daily.append(DAY, "planned the garden")
    assert len(daily.search("garden", since=None, limit=10)) == 1
    daily.append(DAY, "x")
    daily.append(DAY, "watered the garden")
    assert [h.line_range for h in daily.search("garden", since=None, limit=10)] == [
        (1, 1),
        (3, 3),
    ]
    daily.archive(DAY)
    assert len(daily.search("garden", since=DAY, limit=10)) == 2
    assert daily.search("garden", since=DAY + timedelta(days=1), limit=10) == []
    write(directory / "archive" / "2026-04-11.md", "paved the yard\n")
    assert daily.search("garden", since=None, limit=10) == []


def test_a_year_of_daily_files_fills_every_page(directory: Path, daily: DailyLog) -> None:
    # How fast this is, is measured in bench/recall_scale.py, not asserted here.
    words = ["coffee", "garden", "meeting", "lunch", "sleep", "vegetables", "focus", "walk"]
    for offset in range(365):
        day = date(2025, 4, 1) + timedelta(days=offset)
        folder = directory if offset >= 358 else directory / "archive"
        lines = (
            f"note {n}: {words[(offset + n) % 8]} then {words[(offset * n) % 8]} on day {offset}"
            for n in range(50)
        )
        write(folder / f"{day.isoformat()}.md", "\n".join(lines) + "\n")
    for query in ["coffee", "user.food.vegetables", "sleep focus walk", "meeting about lunch"]:
        assert len(daily.search(query, since=None, limit=10)) == 10


def test_a_line_that_says_more_is_not_less_about_what_it_says(
    directory: Path, daily: DailyLog
) -> None:
    """Lines are discounted for their length less than documents are: a long line that
    names the thing three times outranks a one-word line (it would not with the usual
    document setting)."""
    long = "tea at noon, tea at four, and tea again after dinner with the whole family around"
    filler = [f"filler line number {n} about nothing" for n in range(20)]
    write(directory / "2026-04-11.md", "\n".join(["tea", "x", long, "y", *filler]) + "\n")
    assert [hit.line_range for hit in daily.search("tea", since=None, limit=10)] == [
        (3, 3),
        (1, 1),
    ]


def test_between_equal_lines_the_newer_day_comes_first(directory: Path, daily: DailyLog) -> None:
    write(directory / "archive" / "2026-04-09.md", "green tea\n")
    write(directory / "2026-04-11.md", "green tea\n")
    write(directory / "archive" / "2026-04-10.md", "green tea\n")
    daily.refresh()
    assert [hit.date for hit in daily.search("tea", since=None, limit=10)] == [
        "2026-04-11",
        "2026-04-10",
        "2026-04-09",
    ]


def test_a_line_borrows_a_share_of_its_neighbours_scores() -> None:
    other = DAY - timedelta(days=1)
    raw = {
        (DAY, False, 1): 1.0,
        (DAY, False, 2): 2.0,
        (DAY, False, 3): 4.0,
        (DAY, False, 5): 8.0,  # line 4 does not match
        (DAY, True, 4): 16.0,  # the archived file is another file
        (other, False, 4): 32.0,  # and so is another day
    }
    assert _with_neighbours(raw) == pytest.approx(
        {
            (DAY, False, 1): 1.0 + 0.4 * 2.0,
            (DAY, False, 2): 2.0 + 0.4 * (1.0 + 4.0),
            (DAY, False, 3): 4.0 + 0.4 * 2.0,
            (DAY, False, 5): 8.0,
            (DAY, True, 4): 16.0,
            (other, False, 4): 32.0,
        }
    )


@pytest.mark.parametrize(
    ("ranked", "limit", "spans"),
    [
        # A line joins the hit that starts right after it.
        ([5, 4], 5, [(4, 5, 0)]),
        # A line between two hits makes them one, ranked by the better, and frees a place.
        ([1, 3, 2, 7, 9], 2, [(1, 3, 0), (7, 7, 3)]),
        ([3, 1, 2, 5], 2, [(1, 3, 0), (5, 5, 3)]),
        ([1, 3, 5, 2, 9, 11], 3, [(1, 3, 0), (5, 5, 2), (9, 9, 4)]),
        # Full: the next line that would open a hit ends the taking.
        ([1, 5, 9, 2], 2, [(1, 1, 0), (5, 5, 1)]),
    ],
)
def test_taken_lines_form_hits_in_rank_order(
    ranked: list[int], limit: int, spans: list[tuple[int, int, int]]
) -> None:
    taken = _spans([(DAY, False, number) for number in ranked], limit)
    assert [(span.start, span.end, span.rank) for span in taken] == spans


def test_a_claimed_day_is_searched_once_beside_its_archive_and_live_lines(tmp_path: Path) -> None:
    """Issue 25, finding 3: a consolidation that holds the day (in flight, or failed with
    the model unreachable) does not hide the day from search; each line is found once."""
    daily = DailyLog(tmp_path)
    day = date(2026, 4, 11)
    daily.append(day, "first dentist visit")
    daily.archive(day)
    daily.append(day, "second dentist visit")
    assert daily.claim(day) is not None
    daily.append(day, "third dentist visit")
    found = [(h.excerpt, h.line_range) for h in daily.search("dentist", since=None, limit=10)]
    assert sorted(found) == [
        ("first dentist visit\nsecond dentist visit", (1, 2)),
        ("third dentist visit", (1, 1)),
    ]


@pytest.mark.parametrize("marker", ["[forgotten: a]\n", "[forgotten:\ra]"])
def test_a_redaction_marker_with_a_line_break_is_refused_and_nothing_is_rewritten(
    tmp_path: Path, marker: str
) -> None:
    """A marker that broke its line would shift every later line's number, and the marks
    citing them would point at other words."""
    daily = DailyLog(tmp_path)
    daily.append(DAY, "the dentist on tuesday")
    daily.archive(DAY)
    before = daily.path(DAY, archived=True).read_bytes()
    with pytest.raises(ValueError, match=r"^a marker must not contain a line break$"):
        daily.redact_archive({DAY: [1]}, marker)
    assert daily.path(DAY, archived=True).read_bytes() == before
    assert daily.redact_archive({DAY: [1]}, "[forgotten: a]") == 1


def test_a_redaction_is_refused_while_a_merge_of_the_day_is_half_done(tmp_path: Path) -> None:
    """The merge's record counts the archive's bytes: a rewrite now would make the merge
    append the wrong ones. The forget fails with this reason (what ``cambium failures``
    shows) and is retried after the merge ends."""
    daily = DailyLog(tmp_path)
    archive = merge_half_done(daily, DAY, "the dentist on tuesday", "the dentist again")
    before = archive.read_bytes()
    with pytest.raises(fs.RefusedFile) as refused:
        daily.redact_archive({DAY: [1]}, "[forgotten: a]")
    assert str(refused.value) == (
        "[Errno 0] refused: a merge of this day is half done: '2026-04-11.md'"
    )
    assert archive.read_bytes() == before
    daily.merge(DAY)
    assert daily.redact_archive({DAY: [1]}, "[forgotten: a]") == 1


def test_a_redaction_counts_only_lines_it_changed_and_tells_what_was_there(
    tmp_path: Path,
) -> None:
    """A day with no archive changes nothing; the listeners (the embeddings' upkeep) are
    told the day's archived lines as they were, and the claim's after them."""
    daily = DailyLog(tmp_path / "daily")
    tmp_path = tmp_path / "daily"
    told: list[tuple[date, list[str], list[int]]] = []
    daily.on_redact(lambda day, before, numbers: told.append((day, list(before), list(numbers))))
    assert daily.redact_archive({DAY: [1]}, "[forgotten: a]") == 0
    assert not tmp_path.exists()  # nothing is created to redact nothing
    daily.append(DAY, "the dentist on tuesday")
    assert daily.redact_archive({DAY: [1]}, "[forgotten: a]") == 0
    assert not (tmp_path / "archive").exists()
    daily.append(DAY, "lunch after")
    daily.archive(DAY)
    assert daily.redact_archive({DAY - timedelta(days=1): [1]}, "[forgotten: a]") == 0
    assert told == []
    assert daily.redact_archive({DAY: [1]}, "[forgotten: a]") == 1
    assert told == [(DAY, ["the dentist on tuesday", "lunch after"], [1])]
    assert daily.redact_archive({DAY: [1]}, "[forgotten: a]") == 0  # already the marker
    daily.append(DAY, "a new dentist")
    assert daily.claim(DAY) is not None
    assert daily.redact_archive({DAY: [2]}, "[forgotten: b]") == 1
    assert told[-1] == (DAY, ["[forgotten: a]", "lunch after", "a new dentist"], [2])
    daily.merge(DAY)
    daily.append(DAY + timedelta(days=1), "the dentist, the next day")
    daily.archive(DAY + timedelta(days=1))
    cited = {DAY: [2, 3], DAY + timedelta(days=1): [1]}
    assert daily.redact_archive(cited, "[forgotten: c]") == 3  # counted over every day
