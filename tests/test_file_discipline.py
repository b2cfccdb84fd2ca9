"""The one discipline of the daily files (SPEC §13, issue 11): never through a symlink or
into a hard-linked file, never blocked by a FIFO, whole lines or nothing, private modes.

Every test plants something hostile and checks what a user would notice: no byte written
outside the daily directory, no line cut in half, no file readable by other users.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path

import pytest

from daemon.files.daily import DailyLog
from daemon.files.fs import RefusedFile, read_regular

DAY = date(2026, 4, 11)
NAME = "2026-04-11.md"
PATIENCE = 30.0  # seconds a hang may take before the test calls it one (not a timing check)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the daily one holding a file the daemon must never touch (say,
    a substrate file)."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "SOUL.md").write_text("# Soul\nmine, not the daemon's\n")
    return directory


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    path = tmp_path / "daily"
    (path / "archive").mkdir(parents=True)
    return path


def hashes(root: Path) -> dict[str, str]:
    return {
        str(path): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def finishes(work: Callable[[], object]) -> object:
    """Run ``work`` in a thread; fail if it is still blocked after PATIENCE seconds."""
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(work()), daemon=True)
    thread.start()
    thread.join(PATIENCE)
    assert not thread.is_alive(), "blocked (a FIFO was opened for reading?)"
    return result[0] if result else None


# -- symlinks and hard links (finding 5) ---------------------------------------------------


def test_an_append_never_follows_a_symlinked_daily_file(directory: Path, outside: Path) -> None:
    before = hashes(outside)
    (directory / NAME).symlink_to(outside / "SOUL.md")
    with pytest.raises(RefusedFile, match="symlink"):
        DailyLog(directory).append(DAY, "a note")
    assert hashes(outside) == before


def test_a_dangling_symlink_is_not_created_through(directory: Path, outside: Path) -> None:
    (directory / NAME).symlink_to(outside / "new.md")
    with pytest.raises(RefusedFile):
        DailyLog(directory).append(DAY, "a note")
    assert not (outside / "new.md").exists()


def test_an_append_never_writes_a_file_hard_linked_elsewhere(
    directory: Path, outside: Path
) -> None:
    before = hashes(outside)
    os.link(outside / "SOUL.md", directory / NAME)
    with pytest.raises(RefusedFile, match="hard link"):
        DailyLog(directory).append(DAY, "a note")
    assert hashes(outside) == before


def plant_archive_target(directory: Path, outside: Path) -> None:
    (directory / "archive" / NAME).symlink_to(outside / "SOUL.md")


def plant_archive_directory(directory: Path, outside: Path) -> None:
    (directory / "archive").rmdir()
    (directory / "archive").symlink_to(outside)
    (outside / NAME).write_text("an archived day, outside\n")


def plant_staging(directory: Path, outside: Path) -> None:
    (directory / "archive" / NAME).write_text("archived\n")
    (directory / "archive" / f".{NAME}.incoming").symlink_to(outside / "SOUL.md")


def plant_record(directory: Path, outside: Path) -> None:
    (directory / "archive" / NAME).write_text("archived\n")
    (directory / "archive" / f".{NAME}.merge").symlink_to(outside / "SOUL.md")


def plant_record_temporary(directory: Path, outside: Path) -> None:
    (directory / "archive" / NAME).write_text("archived\n")
    (directory / "archive" / f".{NAME}.merge.tmp").symlink_to(outside / "SOUL.md")


@pytest.mark.parametrize(
    "plant",
    [
        plant_archive_target,
        plant_archive_directory,
        plant_staging,
        plant_record,
        plant_record_temporary,
    ],
)
def test_archiving_never_writes_through_a_planted_symlink(
    directory: Path, outside: Path, plant: Callable[[Path, Path], None]
) -> None:
    plant(directory, outside)
    daily = DailyLog(directory)
    daily.append(DAY, "a line of today")
    before = hashes(outside)
    with contextlib.suppress(RefusedFile):  # refusing is fine; writing outside is not
        daily.archive(DAY)
    assert hashes(outside) == before
    assert sorted(p.name for p in outside.iterdir() if not p.is_symlink()) == sorted(
        Path(k).name for k in before
    ), "nothing created outside"


# -- FIFOs (finding 10) ------------------------------------------------------------------


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "2026-04-11.md"
    os.mkfifo(fifo)

    def read() -> object:
        try:
            return read_regular(fifo)
        except RefusedFile as exc:
            return exc

    assert isinstance(finishes(read), RefusedFile)


def test_a_fifo_named_like_a_daily_file_is_skipped_by_search_and_refused_by_append(
    directory: Path,
) -> None:
    (directory / "2026-04-10.md").write_text("walked in the garden\n")
    os.mkfifo(directory / NAME)
    os.mkfifo(directory / "archive" / "2026-04-09.md")
    daily = DailyLog(directory)
    hits = finishes(lambda: daily.search("garden", since=None, limit=10))
    assert [hit.date for hit in hits] == ["2026-04-10"]  # type: ignore[attr-defined]
    assert finishes(lambda: daily.read(DAY)) is None
    assert finishes(lambda: daily.evidence(NAME, (1, 1))) is None

    def append() -> object:
        try:
            return daily.append(DAY, "a note")
        except RefusedFile as exc:
            return exc

    assert isinstance(finishes(append), RefusedFile)


# -- modes (finding 14) ------------------------------------------------------------------


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.usefixtures("open_umask")
def test_what_the_daemon_creates_is_private_whatever_the_umask(tmp_path: Path) -> None:
    directory = tmp_path / "memory" / "daily"
    daily = DailyLog(directory)
    daily.append(DAY, "first")
    daily.archive(DAY)
    daily.append(DAY, "second")
    daily.archive(DAY)  # merged into the archived day: a record file came and went
    daily.append(date(2026, 4, 12), "today")

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    assert mode(tmp_path / "memory") == 0o700
    assert mode(directory) == 0o700
    assert mode(directory / "archive") == 0o700
    assert mode(directory / "archive" / NAME) == 0o600
    assert mode(directory / "2026-04-12.md") == 0o600


# -- a full disk (finding 8) -------------------------------------------------------------

# A process whose file size limit stops an append half way, as a full disk does: the write
# stores what fits, the next one fails (EFBIG, with SIGXFSZ ignored).
FULL_DISK = """
import resource, signal, sys
from datetime import date
from pathlib import Path
from daemon.files.daily import DailyLog
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
path = Path(sys.argv[1])
limit = path.stat().st_size + 10
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    DailyLog(path.parent).append(date(2026, 4, 11), "a line much longer than ten bytes")
except OSError as exc:
    print(exc.errno)
    sys.exit(7)
"""


@pytest.mark.subprocess  # a Python child process with its own file size limit
def test_an_append_that_hits_a_full_disk_leaves_no_partial_line(directory: Path) -> None:
    path = directory / NAME
    path.write_text("before\n")
    result = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 7, result.stderr
    assert path.read_text() == "before\n", "cut back to the size before"
    # The retry (with room again) appends the whole line once, on a line of its own.
    DailyLog(directory).append(DAY, "a line much longer than ten bytes")
    assert DailyLog(directory).read(DAY) == ["before", "a line much longer than ten bytes"]
