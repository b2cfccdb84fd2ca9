"""The daily directory's watch, on real directories with watchfiles: it tells the daily log
when its watch is set and when a file under it changes, so a recall looks at the files
only then."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import date
from pathlib import Path

import anyio
import pytest

from daemon.files.daily import DailyLog
from daemon.files.daily_watch import watch_daily

PATIENCE = 30.0  # seconds to wait for the watch to tell (a bound, not a timing check)
DAY = date(2026, 4, 11)


class ToldDaily(DailyLog):
    """A daily log that keeps what its watch told it, for a test to wait on."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.told: list[str] = []
        self._next = anyio.Event()

    def watched(self, watched: bool) -> None:
        super().watched(watched)
        self._tell("watched" if watched else "not watched")

    def changed_on_disk(self) -> None:
        super().changed_on_disk()
        self._tell("changed")

    def _tell(self, what: str) -> None:
        self.told.append(what)
        told, self._next = self._next, anyio.Event()
        told.set()

    async def until_told(self, what: str) -> None:
        """Until the watch tells ``what`` (again: what it told before is forgotten)."""
        self.told.clear()
        with anyio.fail_after(PATIENCE):
            while what not in self.told:
                await self._next.wait()


@asynccontextmanager
async def watching(daily: DailyLog) -> AsyncIterator[None]:
    stop = anyio.Event()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: watch_daily(daily, stop, recheck=0.2))
        yield
        stop.set()


@pytest.mark.asyncio
async def test_the_watch_tells_of_a_hand_edit_in_the_directory_and_its_archive(
    tmp_path: Path,
) -> None:
    daily = ToldDaily(tmp_path)
    daily.append(DAY, "tea with Anna")
    async with watching(daily):
        await daily.until_told("watched")
        with daily.path(DAY).open("a") as file:
            file.write("coffee with Bruno\n")  # by hand
        await daily.until_told("changed")
        daily.archive_directory.mkdir()
        await anyio.wait_all_tasks_blocked()
        await daily.until_told("changed")
        daily.path(DAY, archived=True).write_text("an archived line\n")
        await daily.until_told("changed")
    assert daily.told[-1] == "not watched"  # the watch ended with the daemon
    assert [h.excerpt for h in daily.search("bruno", since=None, limit=5)] == ["coffee with Bruno"]


@pytest.mark.asyncio
async def test_a_daily_directory_made_after_the_start_is_watched(tmp_path: Path) -> None:
    daily = ToldDaily(tmp_path / "daily")
    async with watching(daily):
        await anyio.wait_all_tasks_blocked()
        assert "watched" not in daily.told  # nothing to watch: a look every few seconds
        daily.append(DAY, "tea with Anna")  # makes the directory
        await daily.until_told("watched")


@pytest.mark.asyncio
async def test_a_replaced_daily_directory_is_watched_again(tmp_path: Path) -> None:
    directory = tmp_path / "daily"
    daily = ToldDaily(directory)
    daily.append(DAY, "tea with Anna")
    async with watching(daily):
        await daily.until_told("watched")
        directory.rename(tmp_path / "daily.old")
        directory.mkdir()  # (a restore from a backup, say)
        await daily.until_told("watched")
        assert "not watched" in daily.told
        (directory / f"{DAY.isoformat()}.md").write_text("coffee with Bruno\n")
        await daily.until_told("changed")
