"""The substrate watcher, on real directories with watchfiles."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
import structlog
from support import refused_watch

from daemon.files import watcher
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


class Reading(Noticed):
    """:class:`Noticed`, and what the substrate says of a file once the watcher noticed."""

    async def until_says(self, substrate: Substrate, path: Path, words: str) -> bool:
        with anyio.move_on_after(PATIENCE):
            while True:
                change = self._next
                if path in substrate.files() and words in substrate.read(path):
                    return True
                await change.wait()
        return False


@asynccontextmanager
async def watching(substrate: Substrate) -> AsyncIterator[Reading]:
    """The watcher running on ``substrate`` (rechecking every 0.2 s) until the block ends."""
    stop = anyio.Event()
    noticed = Reading()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: watch_substrate(substrate, stop, on_change=noticed, recheck=0.2))
        await anyio.wait_all_tasks_blocked()
        yield noticed
        stop.set()


@pytest.mark.asyncio
async def test_writes_beside_a_file_entry_do_not_wake_the_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file entry, and a missing one, were watched through their directory, which woke
    the watch at every write to any file beside them: the store's database and its
    write-ahead log, at every stored signal, when ``SOUL.md`` sits next to them (up to a
    tenth more of the daemon's CPU per signal). A file is watched itself now, and a missing
    entry is looked for at each recheck."""
    from daemon.files import watcher

    woken: list[set[tuple[object, str]]] = []
    real_awatch = watcher.awatch

    async def counting_awatch(*paths: Path, **options: object):  # type: ignore[no-untyped-def]
        async for changes in real_awatch(*paths, **options):  # type: ignore[arg-type]
            woken.extend([changes] if changes else [])
            yield changes

    monkeypatch.setattr(watcher, "awatch", counting_awatch)
    soul = tmp_path / "SOUL.md"
    soul.write_text("# Soul\nI am patient.\n")
    substrate = Substrate([soul, tmp_path / "USER.md"])
    assert "patient" in substrate.read(soul)
    async with watching(substrate) as noticed:
        wal = tmp_path / "cambium.db-wal"
        for n in range(20):
            with wal.open("a") as f:
                f.write(f"frame {n}\n")
            await anyio.sleep(0.02)
        with soul.open("a") as f:
            f.write("I love gardening.\n")
        assert await noticed.until_says(substrate, soul, "gardening")
    assert woken and all(path == str(soul) for changes in woken for _, path in changes)


def save_by_rename(path: Path, text: str) -> None:
    """What an editor does: write a temporary file, then rename it over the file."""
    temporary = path.with_name(f".{path.name}.swp")
    temporary.write_text(text)
    os.replace(temporary, path)


@pytest.mark.asyncio
async def test_a_file_entry_saved_by_rename_is_watched_again(tmp_path: Path) -> None:
    """A watch on a file ends with the file an editor's save renames over it: the new file
    is watched in turn, so the edits after the save are seen too, also when something kept
    the old file open (its deletion is then not reported)."""
    soul = tmp_path / "SOUL.md"
    soul.write_text("# Soul\nI am patient.\n")
    substrate = Substrate([soul])
    async with watching(substrate) as noticed:
        save_by_rename(soul, "# Soul\nI love pottery.\n")
        assert await noticed.until_says(substrate, soul, "pottery")
        with soul.open("a") as f:
            f.write("And kayaking.\n")
        assert await noticed.until_says(substrate, soul, "kayaking")
        with soul.open() as held:  # (the old file stays open: no deletion is reported)
            save_by_rename(soul, "# Soul\nI sing in a choir.\n")
            assert await noticed.until_says(substrate, soul, "choir")
            with soul.open("a") as f:
                f.write("On Tuesdays.\n")
            assert await noticed.until_says(substrate, soul, "Tuesdays")
            assert "kayaking" in held.read()


@pytest.mark.asyncio
async def test_a_file_entry_made_after_the_start_is_watched_from_then_on(tmp_path: Path) -> None:
    user = tmp_path / "USER.md"
    substrate = Substrate([user])
    async with watching(substrate) as noticed:
        user.write_text("# User\nLikes tea.\n")
        assert await noticed.until_says(substrate, user, "tea")
        await anyio.sleep(0.5)  # (watched itself by then)
        with user.open("a") as f:
            f.write("And figs.\n")
        assert await noticed.until_says(substrate, user, "figs")
        save_by_rename(user, "# User\nLikes coffee.\n")
        assert await noticed.until_says(substrate, user, "coffee")


@pytest.mark.asyncio
async def test_a_refused_watch_leaves_the_daemon_running_and_the_substrate_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the system's limit on watches reached (other programs hold them), the watcher
    raised, and the error stopped the daemon."""
    monkeypatch.setattr(watcher, "awatch", refused_watch)
    food = tmp_path / "food.md"
    food.write_text("# Food\nSoup on Mondays.\n")
    substrate = CountedSubstrate([tmp_path], enough=10)
    assert "Soup" in substrate.read(food)
    food.write_text("# Food\nStew on Mondays.\n")  # by hand, and no watch to tell
    stop = anyio.Event()
    with structlog.testing.capture_logs() as logs:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: watch_substrate(substrate, stop, recheck=0.01))
            with anyio.fail_after(PATIENCE):
                await substrate.looked_enough.wait()  # tried again, and again
            assert "Stew" in substrate.read(food)
            stop.set()
    told = [e for e in logs if e["event"].startswith("cannot watch the substrate")]
    assert [(e["log_level"], e["error"]) for e in told] == [
        ("warning", "OS file watch limit reached")
    ]
