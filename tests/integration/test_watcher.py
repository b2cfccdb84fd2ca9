"""The substrate watcher, on real directories with watchfiles."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import structlog

from daemon.files.substrate import Substrate
from daemon.files.watcher import watch_substrate

PATIENCE = 30.0  # seconds to wait for the watcher to notice (a bound, not a timing check)


class Noticed:
    """The watcher's ``on_change``: each call wakes whoever waits for the next one."""

    def __init__(self) -> None:
        self._next = anyio.Event()

    def __call__(self, paths: set[Path]) -> None:
        noticed, self._next = self._next, anyio.Event()
        noticed.set()

    async def until_found(self, substrate: Substrate, path: Path) -> bool:
        """Whether ``path`` is among the substrate's files once the watcher noticed it."""
        with anyio.move_on_after(PATIENCE):
            while True:
                change = self._next  # taken before looking, so no change is missed
                if path in substrate.files():
                    return True
                await change.wait()
        return False


@pytest.mark.asyncio
async def test_a_substrate_directory_created_after_the_start_is_watched(tmp_path: Path) -> None:
    """Issue 11, finding 15: a directory missing at the start was never watched, so files
    written into it later stayed invisible until a restart."""
    entry = tmp_path / "memory" / "long-term"
    substrate = Substrate([entry])
    assert substrate.files() == []  # cached: nothing there
    stop = anyio.Event()
    noticed = Noticed()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: watch_substrate(substrate, stop, on_change=noticed, recheck=0.2))
        await anyio.wait_all_tasks_blocked()  # the watcher settled on "nothing to watch"
        entry.mkdir(parents=True)
        (entry / "food.md").write_text("# Food\n")
        assert await noticed.until_found(substrate, entry / "food.md")
        # And it is watched now (its watch is set up before the watcher blocks): a file
        # added later is seen too.
        await anyio.wait_all_tasks_blocked()
        (entry / "sleep.md").write_text("# Sleep\n")
        assert await noticed.until_found(substrate, entry / "sleep.md")
        stop.set()


class CountedSubstrate(Substrate):
    """A substrate that says when the watcher has looked for its directories ``enough``
    times (each look is one recheck)."""

    def __init__(self, entries: list[Path], enough: int) -> None:
        super().__init__(entries)
        self.looks = 0
        self.enough = enough
        self.looked_enough = anyio.Event()

    def watch_roots(self) -> list[Path]:
        self.looks += 1
        if self.looks >= self.enough:
            self.looked_enough.set()
        return super().watch_roots()


@pytest.mark.asyncio
async def test_a_missing_substrate_directory_is_told_once_as_a_warning(tmp_path: Path) -> None:
    """Issue 26, finding 9: it was logged at info every 2 s forever (~43,000 lines a day)."""
    entry = tmp_path / "memory" / "long-term"
    substrate = CountedSubstrate([entry], enough=20)
    stop = anyio.Event()
    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: watch_substrate(substrate, stop, recheck=0.01))
            with anyio.fail_after(PATIENCE):
                await substrate.looked_enough.wait()
            stop.set()
    told = [e for e in logs if e["event"] == "no substrate directory to watch yet"]
    assert [(e["log_level"], e["entries"]) for e in told] == [("warning", [str(entry)])]


@pytest.mark.asyncio
async def test_with_no_substrate_configured_there_is_nothing_to_warn_about(
    tmp_path: Path,
) -> None:
    substrate = CountedSubstrate([], enough=5)
    stop = anyio.Event()
    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: watch_substrate(substrate, stop, recheck=0.01))
            with anyio.fail_after(PATIENCE):
                await substrate.looked_enough.wait()
            stop.set()
    assert [e["log_level"] for e in logs] == ["info"]
