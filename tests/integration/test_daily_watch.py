"""The daily directory's watch, on real directories with watchfiles: it tells the daily log
when its watch is set and when a file under it changes, so a recall looks at the files
only then."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from datetime import date
from pathlib import Path

import anyio
import pytest
import structlog
from support import refused_watch

from daemon.files import daily_watch
from daemon.files.daily import DailyLog
from daemon.files.daily_watch import watch_daily
from daemon.files.hand_edits import HandEdits

PATIENCE = 30.0  # seconds to wait for the watch to tell (a bound, not a timing check)
DAY = date(2026, 4, 11)


class ToldHandEdits(HandEdits):
    """A daily log's schedule of looks that keeps what the watch told it, for a test to
    wait on, and counts the looks taken."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        super().__init__(5.0, monotonic)
        self.told: list[str] = []
        self._next = anyio.Event()
        self.looks = 0

    def take_look(self) -> bool:
        taken = super().take_look()
        self.looks += taken
        return taken

    def watched(self, watched: bool) -> None:
        super().watched(watched)
        self._tell("watched" if watched else "not watched")

    def changed(self, paths: Collection[Path]) -> None:
        super().changed(paths)
        self._tell("changed")

    def _tell(self, what: str) -> None:
        self.told.append(what)
        told, self._next = self._next, anyio.Event()
        told.set()

    async def after(self, change: Callable[[], object], what: str) -> None:
        """Make ``change``, then wait until the watch tells ``what`` of it."""
        seen = len(self.told)
        change()
        await self.until_told(what, seen)

    async def until_told(self, what: str, since: int = 0, times: int = 1) -> None:
        """Until the watch has told ``what`` (``times`` times) since it had told ``since``
        things."""
        with anyio.fail_after(PATIENCE):
            while self.told[since:].count(what) < times:
                await self._next.wait()


def told_daily(directory: Path, monotonic: Callable[[], float] = time.monotonic) -> DailyLog:
    daily = DailyLog(directory)
    daily.hand_edits = ToldHandEdits(monotonic)
    return daily


def told(daily: DailyLog) -> ToldHandEdits:
    assert isinstance(daily.hand_edits, ToldHandEdits)
    return daily.hand_edits


def append_by_hand(daily: DailyLog, line: str) -> None:
    with daily.path(DAY).open("a") as file:
        file.write(line + "\n")


@asynccontextmanager
async def watching(daily: DailyLog) -> AsyncIterator[None]:
    stop = anyio.Event()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: watch_daily(daily, stop, recheck=0.2, wake=0.2))
        yield
        stop.set()


@pytest.mark.asyncio
async def test_the_watch_tells_of_a_hand_edit_in_the_directory_and_its_archive(
    tmp_path: Path,
) -> None:
    daily = told_daily(tmp_path)
    edits = told(daily)
    daily.append(DAY, "tea with Anna")
    async with watching(daily):
        await edits.until_told("watched")
        await edits.after(lambda: append_by_hand(daily, "coffee with Bruno"), "changed")
        await edits.after(daily.archive_directory.mkdir, "changed")
        archived = daily.path(DAY, archived=True)
        await edits.after(lambda: archived.write_text("an archived line\n"), "changed")
    assert edits.told[-1] == "not watched"  # the watch ended with the daemon
    assert [h.excerpt for h in daily.search("bruno", since=None, limit=5)] == ["coffee with Bruno"]


@pytest.mark.asyncio
async def test_a_daily_directory_made_after_the_start_is_watched(tmp_path: Path) -> None:
    daily = told_daily(tmp_path / "daily")
    async with watching(daily):
        await anyio.wait_all_tasks_blocked()
        assert "watched" not in told(daily).told  # nothing to watch: a look every few seconds
        daily.append(DAY, "tea with Anna")  # makes the directory
        await told(daily).until_told("watched")


@pytest.mark.asyncio
async def test_a_replaced_daily_directory_is_watched_again(tmp_path: Path) -> None:
    directory = tmp_path / "daily"
    daily = told_daily(directory)
    edits = told(daily)
    daily.append(DAY, "tea with Anna")
    async with watching(daily):
        await edits.until_told("watched")

        def restore_from_a_backup() -> None:
            directory.rename(tmp_path / "daily.old")
            directory.mkdir()

        await edits.after(restore_from_a_backup, "watched")
        assert edits.told[-2:] == ["not watched", "watched"]
        await edits.after(lambda: append_by_hand(daily, "coffee with Bruno"), "changed")


@pytest.mark.asyncio
async def test_the_daily_logs_own_appends_call_for_no_look_and_a_hand_edit_does(
    tmp_path: Path,
) -> None:
    clock = [100.0]
    daily = told_daily(tmp_path, monotonic=lambda: clock[0])
    edits = told(daily)

    def excerpts(query: str) -> list[str]:
        return [hit.excerpt for hit in daily.search(query, since=None, limit=5)]

    async with watching(daily):
        await edits.until_told("watched")
        assert excerpts("anna") == []  # the look due once the watch is set
        looks = edits.looks
        await edits.after(lambda: daily.append(DAY, "tea with Anna"), "changed")
        clock[0] += 60
        assert excerpts("anna") == ["tea with Anna"]  # indexed as it was written
        assert edits.looks == looks
        await edits.after(lambda: append_by_hand(daily, "coffee with Bruno"), "changed")
        clock[0] += 60
        assert excerpts("bruno") == ["coffee with Bruno"]
        assert edits.looks == looks + 1


@pytest.mark.asyncio
async def test_a_refused_watch_is_told_once_and_the_looks_go_on_every_few_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daily_watch, "awatch", refused_watch)
    clock = [100.0]
    daily = told_daily(tmp_path, monotonic=lambda: clock[0])
    edits = told(daily)
    daily.append(DAY, "tea with Anna")
    with structlog.testing.capture_logs() as logs:
        async with watching(daily):
            await edits.until_told("not watched", times=3)  # tried again, and again
            assert daily.search("anna", since=None, limit=5) != []
            append_by_hand(daily, "coffee with Bruno")  # and no watch to tell
            clock[0] += 5
            assert [h.excerpt for h in daily.search("bruno", since=None, limit=5)] == [
                "coffee with Bruno"
            ]
    told_once = [e for e in logs if e["event"].startswith("cannot watch the daily directory")]
    assert [(e["log_level"], e["error"]) for e in told_once] == [
        ("warning", "OS file watch limit reached")
    ]
