"""The one discipline of the daily files (SPEC §13, issue 11): never through a symlink or
into a hard-linked file, never blocked by a FIFO, whole lines or nothing, private modes.

Every test plants something hostile and checks what a user would notice: no byte written
outside the daily directory, no line cut in half, no file readable by other users.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import structlog

from daemon.files.daily import DailyLog
from daemon.fs import Folder, RefusedFile, make_private_file, read_regular, whole_file

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


def refusal(exc: BaseException) -> tuple[object, object, object]:
    """What a refusal tells the person who reads it: why (its errno and words) and where."""
    assert isinstance(exc, RefusedFile)
    return exc.errno, exc.strerror, exc.filename


def test_an_append_never_follows_a_symlinked_daily_file(directory: Path, outside: Path) -> None:
    before = hashes(outside)
    (directory / NAME).symlink_to(outside / "SOUL.md")
    with pytest.raises(RefusedFile) as refused:
        DailyLog(directory).append(DAY, "a note")
    assert refusal(refused.value) == (errno.ELOOP, "refused: a symlink", str(directory / NAME))
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
    with pytest.raises(RefusedFile) as refused:
        DailyLog(directory).append(DAY, "a note")
    assert refusal(refused.value) == (
        errno.EMLINK,
        "refused: a daily file with more than one hard link",
        str(directory / NAME),
    )
    assert hashes(outside) == before


def test_an_append_to_a_directory_named_like_the_day_is_refused(directory: Path) -> None:
    (directory / NAME).mkdir()
    with pytest.raises(RefusedFile) as refused:
        DailyLog(directory).append(DAY, "a note")
    assert refusal(refused.value) == (
        errno.EISDIR,
        "refused: not a regular file or directory",
        str(directory / NAME),
    )


def test_a_claim_refuses_a_symlinked_daily_file_and_leaves_it_where_it_is(
    directory: Path, outside: Path
) -> None:
    (directory / NAME).symlink_to(outside / "SOUL.md")
    with pytest.raises(RefusedFile) as refused:
        DailyLog(directory).claim(DAY)
    assert refusal(refused.value) == (0, "refused: not a regular file", str(directory / NAME))
    assert (directory / NAME).is_symlink()
    assert list((directory / "archive").iterdir()) == []


def test_a_merge_refuses_a_claim_that_is_not_a_regular_file(directory: Path, outside: Path) -> None:
    plant_staging(directory, outside)
    before = hashes(outside)
    with pytest.raises(RefusedFile) as refused:
        DailyLog(directory).merge(DAY)
    staging = directory / "archive" / f".{NAME}.incoming"
    assert refusal(refused.value) == (0, "refused: not a regular file", str(staging))
    assert hashes(outside) == before
    assert (directory / "archive" / NAME).read_text() == "archived\n"


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


def test_a_claim_whose_file_is_deleted_under_it_says_so(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone deletes the claimed file between the daemon's move and its read."""
    (directory / NAME).write_text("a line\n")
    move = Folder.move

    def move_then_lose(folder: Folder, name: str, to: Folder, new_name: str) -> None:
        move(folder, name, to, new_name)
        (to.path / new_name).unlink()

    monkeypatch.setattr(Folder, "move", move_then_lose)
    with pytest.raises(RefusedFile) as refused:
        DailyLog(directory).claim(DAY)
    assert refusal(refused.value) == (
        0,
        "refused: the claim vanished",
        str(directory / "archive"),
    )


def test_a_symlink_planted_while_the_merge_record_is_written_is_not_written_through(
    directory: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone plants a symlink at the record's temporary name right after the daemon
    cleared it: the file is created exclusively, never opened through the link."""
    (directory / "archive" / NAME).write_text("archived\n")
    daily = DailyLog(directory)
    daily.append(DAY, "a line of today")
    clear = Folder.remove

    def clear_then_plant(folder: Folder, name: str) -> None:
        clear(folder, name)
        if name.endswith(".tmp"):
            (folder.path / name).symlink_to(outside / "SOUL.md")

    monkeypatch.setattr(Folder, "remove", clear_then_plant)
    before = hashes(outside)
    with pytest.raises(FileExistsError):
        daily.archive(DAY)
    assert hashes(outside) == before


# -- reading -----------------------------------------------------------------------------


def test_reading_follows_a_symlink_unless_told_not_to(tmp_path: Path, outside: Path) -> None:
    """Substrate files may be symlinks a person made (to a dotfiles checkout, say); the
    daily layer reads its own files without following one."""
    link = tmp_path / "SOUL.md"
    link.symlink_to(outside / "SOUL.md")
    assert read_regular(link) == (outside / "SOUL.md").read_bytes()
    with pytest.raises(RefusedFile) as refused:
        read_regular(link, follow_symlinks=False)
    assert refusal(refused.value) == (errno.ELOOP, "refused: a symlink", str(link))


def test_a_file_larger_than_one_read_comes_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.md"
    data = b"".join(f"line {n:07d}\n".encode() for n in range(300_000))  # 3.6 MB
    path.write_bytes(data)
    assert read_regular(path) == data


def test_each_file_skipped_is_named_once_in_the_log_with_the_reason(
    directory: Path, outside: Path
) -> None:
    os.mkfifo(directory / NAME)
    (directory / "2026-04-10.md").symlink_to(outside / "SOUL.md")
    (directory / "archive").rmdir()
    (directory / "archive").symlink_to(outside)

    def skipped(path: Path, reason: str) -> dict[str, str]:
        return {
            "event": "daily file skipped",
            "path": str(path),
            "reason": reason,
            "log_level": "warning",
        }

    daily = DailyLog(directory)
    with structlog.testing.capture_logs() as logs:
        assert daily.search("soul", since=None, limit=10) == []
        assert daily.search("soul", since=None, limit=10) == []  # nothing new to say
    assert sorted(logs, key=str) == sorted(
        [
            skipped(directory / "archive", "refused: a symlink"),
            skipped(directory / NAME, "refused: not a regular file"),
            skipped(directory / "2026-04-10.md", "refused: not a regular file"),
        ],
        key=str,
    )
    with structlog.testing.capture_logs() as logs:
        assert DailyLog(directory).read(DAY) is None
        assert DailyLog(directory).read(date(2026, 4, 10)) is None
    assert logs == [
        skipped(directory / NAME, "refused: not a regular file"),
        skipped(directory / "2026-04-10.md", "refused: a symlink"),
    ]


# -- FIFOs (finding 10) ------------------------------------------------------------------


@pytest.mark.parametrize("follow_symlinks", [True, False])
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, follow_symlinks: bool) -> None:
    fifo = tmp_path / "2026-04-11.md"
    os.mkfifo(fifo)

    def read() -> object:
        try:
            return read_regular(fifo, follow_symlinks=follow_symlinks)
        except RefusedFile as exc:
            return exc

    refused = finishes(read)
    assert isinstance(refused, RefusedFile)
    assert refusal(refused) == (errno.EINVAL, "refused: not a regular file", str(fifo))


def test_a_fifo_where_a_private_file_belongs_is_refused_naming_it(tmp_path: Path) -> None:
    """The vector file and the model's cache are made with ``make_private_file``: a FIFO
    planted at their path is refused at once, and the error says which path."""
    fifo = tmp_path / "vectors.i8"
    os.mkfifo(fifo, 0o644)

    def make() -> object:
        try:
            return make_private_file(fifo)
        except RefusedFile as exc:
            return exc

    refused = finishes(make)
    assert isinstance(refused, RefusedFile)
    assert refusal(refused) == (errno.EINVAL, "refused: not a regular file", str(fifo))
    assert stat.S_IMODE(fifo.stat().st_mode) == 0o644  # left as it was


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

    refused = finishes(append)
    assert isinstance(refused, RefusedFile)
    assert refusal(refused) == (errno.EINVAL, "refused: not a regular file", str(directory / NAME))


# -- modes (finding 14) ------------------------------------------------------------------


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.usefixtures("open_umask")
def test_what_the_daemon_creates_is_private_whatever_the_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The mode each file and directory had when it was made, before the daemon set it.
    born: list[int] = []
    fchmod = os.fchmod

    def remember(fd: int, mode: int) -> None:
        born.append(stat.S_IMODE(os.fstat(fd).st_mode))
        fchmod(fd, mode)

    monkeypatch.setattr(os, "fchmod", remember)
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
    # Private from the moment each one existed, not only once its mode was set.
    assert len(born) >= 6
    assert [oct(mode) for mode in born if mode & 0o077] == []


def test_a_directory_someone_else_creates_first_is_used_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process makes the memory directory between the daemon's look and its own
    mkdir: the daemon goes on to make the daily directory inside it."""
    mkdir = os.mkdir
    raced: list[str] = []

    def someone_else_first(path: Any, mode: int = 0o777, **kwargs: Any) -> None:
        if not raced:
            raced.append(str(path))
            mkdir(path, 0o755, **kwargs)
        mkdir(path, mode, **kwargs)

    monkeypatch.setattr(os, "mkdir", someone_else_first)
    daily = DailyLog(tmp_path / "memory" / "daily")
    daily.append(DAY, "first")
    assert raced == [str(tmp_path / "memory")]
    assert daily.read(DAY) == ["first"]
    assert stat.S_IMODE((tmp_path / "memory").stat().st_mode) == 0o755  # theirs, left alone


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


@pytest.mark.parametrize("nameless", [True, False], ids=["O_TMPFILE", "hidden-name"])
def test_a_whole_file_is_named_only_once_written_and_never_over_a_newer_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nameless: bool
) -> None:
    """Written without a name (or, on a system without O_TMPFILE, under a hidden one that
    is removed), private, and named only once whole; a name taken meanwhile is kept."""
    if not nameless:
        monkeypatch.delattr(os, "O_TMPFILE")
    with whole_file(tmp_path) as whole:
        whole.file.write(b"the memory")
        assert len(list(tmp_path.iterdir())) == (0 if nameless else 1)
        assert whole.name_as(tmp_path / "export.tar", replace=True)
    with whole_file(tmp_path) as whole:
        whole.file.write(b"the memory, later")
        assert whole.name_as(tmp_path / "export.tar", replace=True)
    with whole_file(tmp_path) as whole:
        whole.file.write(b"someone else's")
        assert not whole.name_as(tmp_path / "export.tar", replace=False)
    assert [p.name for p in tmp_path.iterdir()] == ["export.tar"]
    assert (tmp_path / "export.tar").read_bytes() == b"the memory, later"
    assert stat.S_IMODE((tmp_path / "export.tar").stat().st_mode) == 0o600
