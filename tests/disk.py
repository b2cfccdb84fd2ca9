"""A disk that forgets what was never fsynced, for crash tests of the file layers.

:class:`Disk` watches the ``os`` calls that change files and directories under one root
(``open`` with ``O_CREAT``, ``write``, ``ftruncate``, ``rename``, ``replace``, ``unlink``,
``mkdir``) and the fsyncs that make their effects durable: a file's bytes once that file is
fsynced, a directory entry once every directory it changed is fsynced. A simulated power
cut undoes whatever is not durable yet, newest first, as a disk may after a real one: a
missing fsync then shows as data a caller was told was safe and is gone.

The model is POSIX's promise, not any one file system's (ext4 often keeps more): an fsync of
a file does not make its name durable, and a rename is durable only once the directories it
touched are synced. Linux only (it names descriptors through ``/proc/self/fd``).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Where a crash can be placed: the steps that order what reaches the disk.
STEPS = ("rename", "replace", "unlink", "fsync")
_WATCHED = ("open", "write", "ftruncate", "mkdir", *STEPS)


class Crash(Exception):
    """A simulated power cut."""


@dataclass
class _EntryChange:
    """A directory entry created, renamed or removed, not yet durable."""

    what: str
    unsynced: set[int]  # the inodes of the directories still to be fsynced
    undo: Callable[[], None]


class Disk:
    """The file system under ``root``, as a power cut would leave it. Call :meth:`install`
    before the code under test runs, :meth:`settle` once the test's own setup is written."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._os: dict[str, Callable[..., Any]] = {name: getattr(os, name) for name in _WATCHED}
        # The durable bytes of each file written since its last fsync, by inode.
        self._durable: dict[int, tuple[Path, bytes]] = {}
        self._entries: list[_EntryChange] = []
        self._countdown = 0
        self._crash_steps: tuple[str, ...] = STEPS
        self._crash_after = False
        self._undoing = False
        self.down = False

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in _WATCHED:
            monkeypatch.setattr(os, name, getattr(self, f"_{name}"))

    # -- what a test uses ----------------------------------------------------------------

    def settle(self) -> None:
        """Take everything on the disk now as durable (what a test wrote to set up)."""
        self._durable.clear()
        self._entries.clear()

    def unsynced(self) -> list[str]:
        """What a power cut now would undo: empty once every change is durable."""
        return [change.what for change in self._entries] + [
            f"the bytes of {path}" for path, _ in self._durable.values()
        ]

    def crash_at(self, step: int, *, steps: tuple[str, ...] = STEPS, after: bool = False) -> None:
        """Cut the power at the ``step``-th step from now on (one of ``steps``): before it
        happens, or with ``after`` right after it. Everything before arming counts as
        durable. ``crash_at(0)`` disarms and brings the disk back up."""
        if step:
            self.settle()
        self._countdown, self._crash_steps, self._crash_after = step, steps, after
        self.down = False

    def power_cut(self) -> None:
        """Undo every change not made durable, newest first; the disk stays down (every
        call under the root raises :class:`Crash`) until :meth:`crash_at` re-arms it."""
        self._undoing = True
        try:
            for change in reversed(self._entries):
                change.undo()
            for inode, (_, data) in self._durable.items():
                path = self._find(inode)
                if path is not None:
                    path.write_bytes(data)
        finally:
            self._undoing = False
        self.settle()
        self.down = True

    # -- the watched calls ---------------------------------------------------------------

    def _open(self, name: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        path = self._where(name, dir_fd)
        if path is None:
            return int(self._os["open"](name, flags, mode, dir_fd=dir_fd))
        self._alive()
        existed = os.path.lexists(path)
        fd = int(self._os["open"](name, flags, mode, dir_fd=dir_fd))
        if flags & os.O_CREAT and not existed:
            self._durable[os.fstat(fd).st_ino] = (path, b"")
            self._changed(f"the creation of {path}", [path.parent], lambda: self._delete(path))
        return fd

    def _write(self, fd: int, data: Any) -> int:
        if self._file_of(fd) is not None:
            self._alive()
            self._written(fd)
        return int(self._os["write"](fd, data))

    def _ftruncate(self, fd: int, length: int) -> None:
        if self._file_of(fd) is not None:
            self._alive()
            self._written(fd)
        self._os["ftruncate"](fd, length)

    def _fsync(self, fd: int) -> None:
        if self._file_of(fd) is None:
            self._os["fsync"](fd)
            return
        with self._step("fsync"):
            self._os["fsync"](fd)
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                for change in self._entries:
                    change.unsynced.discard(info.st_ino)
                self._entries = [change for change in self._entries if change.unsynced]
            else:
                self._durable.pop(info.st_ino, None)

    def _rename(self, *args: Any, **kwargs: Any) -> None:
        self._move("rename", *args, **kwargs)

    def _replace(self, *args: Any, **kwargs: Any) -> None:
        self._move("replace", *args, **kwargs)

    def _move(
        self,
        step: str,
        src: Any,
        dst: Any,
        *,
        src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None,
    ) -> None:
        source, target = self._where(src, src_dir_fd), self._where(dst, dst_dir_fd)
        if source is None or target is None:
            self._os[step](src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
            return

        def undo() -> None:
            self._os["rename"](target, source)
            if overwritten is not None:
                self._restore(target, overwritten[1])

        with self._step(step):
            overwritten = self._durable_bytes(target)
            self._os[step](src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
            if overwritten is not None:
                self._durable.pop(overwritten[0], None)
            self._changed(
                f"the {step} of {source} to {target}", [source.parent, target.parent], undo
            )

    def _unlink(self, name: Any, *, dir_fd: int | None = None) -> None:
        path = self._where(name, dir_fd)
        if path is None:
            self._os["unlink"](name, dir_fd=dir_fd)
            return
        with self._step("unlink"):
            removed = self._durable_bytes(path)
            self._os["unlink"](name, dir_fd=dir_fd)
            if removed is not None:
                inode, data = removed
                self._durable.pop(inode, None)
                self._changed(
                    f"the removal of {path}", [path.parent], lambda: self._restore(path, data)
                )

    def _mkdir(self, name: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        path = self._where(name, dir_fd)
        if path is not None:
            self._alive()
        self._os["mkdir"](name, mode, dir_fd=dir_fd)
        if path is not None:
            self._changed(f"the creation of {path}", [path.parent], lambda: shutil.rmtree(path))

    # -- helpers -------------------------------------------------------------------------

    def _where(self, name: Any, dir_fd: int | None) -> Path | None:
        """The absolute path a call names, if it is under the root and is to be watched."""
        if self._undoing or not isinstance(name, str | os.PathLike):
            return None
        base = Path.cwd() if dir_fd is None else Path(os.readlink(f"/proc/self/fd/{dir_fd}"))
        path = base / os.fspath(name)
        return path if path.is_relative_to(self.root) else None

    def _file_of(self, fd: int) -> Path | None:
        """The path of an open file or directory under the root (``None``: not watched)."""
        if self._undoing:
            return None
        try:
            path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            return None
        return path if path.is_relative_to(self.root) else None

    def _alive(self) -> None:
        if self.down:
            raise Crash("the power is off")

    @contextmanager
    def _step(self, step: str) -> Iterator[None]:
        """One step a crash can be placed at: before it, or right after it (whether it
        succeeded or failed, as ``unlink`` of a missing file does)."""
        self._alive()
        crash = False
        if self._countdown > 0 and step in self._crash_steps:
            self._countdown -= 1
            crash = self._countdown == 0
        if crash and not self._crash_after:
            self._crash(step)
        try:
            yield
        finally:
            if crash:
                self._crash(step)

    def _crash(self, step: str) -> None:
        self.power_cut()
        raise Crash(step)

    def _written(self, fd: int) -> None:
        """Before the first unsynced change to a file: remember its durable bytes."""
        inode = os.fstat(fd).st_ino
        if inode not in self._durable:
            path = self._file_of(fd)
            assert path is not None
            with open(f"/proc/self/fd/{fd}", "rb") as file:
                self._durable[inode] = (path, file.read())

    def _durable_bytes(self, path: Path) -> tuple[int, bytes] | None:
        """The inode of the regular file at ``path`` and what a power cut would leave in it
        (``None``: there is no such file)."""
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(info.st_mode):
            raise AssertionError(f"the simulated disk only undoes regular files: {path}")
        durable = self._durable.get(info.st_ino)
        return info.st_ino, durable[1] if durable is not None else path.read_bytes()

    def _changed(self, what: str, directories: list[Path], undo: Callable[[], None]) -> None:
        self._entries.append(_EntryChange(what, {os.stat(d).st_ino for d in directories}, undo))

    def _delete(self, path: Path) -> None:
        self._os["unlink"](path)

    def _restore(self, path: Path, data: bytes) -> None:
        path.write_bytes(data)
        path.chmod(0o600)

    def _find(self, inode: int) -> Path | None:
        for directory, _, names in os.walk(self.root):
            for name in names:
                path = Path(directory) / name
                if os.lstat(path).st_ino == inode:
                    return path
        return None
