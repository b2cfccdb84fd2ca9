"""The one way the file layers and the search package touch the disk (it imports nothing
of ours, so both can stand on it).

Readers (substrate, daily, compost) open every file with :func:`read_regular`: it never
blocks on a FIFO or a device (the open is non-blocking and anything but a regular file is
refused before a byte is read), so no file anyone plants in a memory directory can hang a
recall.

The daemon writes only the daily layer, and only through a :class:`Folder`: a directory
held open by its file descriptor, whose entries are opened relative to it, never through a
symlink (``O_NOFOLLOW``) and never when they are not regular files or have a second hard
link. A path a folder writes therefore always is an entry of that very directory. What it
creates is private to the user (files 0600, directories 0700) whatever the umask, and an
appended line is whole or not there at all: a failed write is cut back to the size before.

Whole files (an export's archive, an imported day) are written by :func:`whole_file`: with
no name until they are whole and durable, so a process killed while writing one leaves no
partial copy of the memory behind.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class RefusedFile(OSError):
    """A path the daemon will not read or write: a symlink, a FIFO, a device, a directory
    where a file belongs, or a file with more than one hard link."""


def read_regular(path: Path, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of ``path`` if it is a regular file. Raises :class:`RefusedFile` for
    anything else (at once, without blocking) and ``FileNotFoundError`` if it is gone."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    fd = _open(str(path), flags)
    try:
        _require_regular(fd, str(path))
        return _read_all(fd)
    finally:
        os.close(fd)


def make_private_file(path: Path) -> None:
    """Make sure ``path`` is a regular file, 0600, in a private directory: created empty if
    missing, so a program that opens it next (SQLite) never creates it with the umask's
    mode; a symlink there is refused (:class:`RefusedFile`), not followed."""
    make_private_directory(path.parent)
    fd = _open(str(path), os.O_RDWR | os.O_CREAT | _NOFOLLOW | os.O_NONBLOCK)
    try:
        _require_regular(fd, str(path))
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def make_private_directory(path: Path) -> None:
    """Create ``path`` and any missing parents as 0700 directories (existing ones are left
    as they are). Each new one is durable in its parent before anything is made in it: an
    fsynced file in a directory whose own name never reached the disk is lost with it."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIRECTORY_MODE)
        except FileExistsError:
            continue
        _make_private(str(directory), None)
        with open_folder(directory.parent, create=False) as parent:
            assert parent is not None
            parent.sync()


class Folder:
    """An open directory whose entries are read and written by name. Use :func:`open_folder`."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    @contextmanager
    def subfolder(self, name: str, *, create: bool) -> Iterator[Folder | None]:
        """The directory entry ``name`` as a folder (``None`` if missing and not
        ``create``). A symlink or a file in its place is refused."""
        if create:
            try:
                os.mkdir(name, DIRECTORY_MODE, dir_fd=self.fd)
            except FileExistsError:
                pass
            else:
                _make_private(name, self.fd)
                self.sync()
        try:
            fd = _open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=self.fd, where=self)
        except FileNotFoundError:
            yield None
            return
        try:
            yield Folder(fd, self.path / name)
        finally:
            os.close(fd)

    # -- looking -------------------------------------------------------------------------

    def kind(self, name: str) -> str | None:
        """``"file"`` for a regular file, ``"other"`` for anything else (a symlink too),
        ``None`` if there is no such entry."""
        try:
            mode = os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None
        return "file" if stat.S_ISREG(mode) else "other"

    def read(self, name: str) -> bytes | None:
        """The bytes of the regular file ``name``; ``None`` if there is none. Raises
        :class:`RefusedFile` for anything else."""
        try:
            fd = _open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=self.fd, where=self)
        except FileNotFoundError:
            return None
        try:
            _require_regular(fd, self._name(name))
            return _read_all(fd)
        finally:
            os.close(fd)

    # -- writing -------------------------------------------------------------------------

    def append(self, name: str, data: bytes, *, whole_lines: bool = True) -> None:
        """Append ``data`` to ``name`` (created 0600 if missing) and fsync it. With
        ``whole_lines``, a file that does not end in a newline gets one first. If anything
        fails, the file is cut back to its size before: it holds all of ``data`` or none."""
        fd, created = self._open_writable(name)
        try:
            size = os.fstat(fd).st_size
            if whole_lines and size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            try:
                os.lseek(fd, size, os.SEEK_SET)
                _write_all(fd, data)
                os.fsync(fd)
            except BaseException:
                _cut_back(fd, size)
                raise
        finally:
            os.close(fd)
        if created:
            self.sync()

    def replace(self, name: str, data: bytes) -> None:
        """Replace ``name`` with a new 0600 file holding ``data``, atomically: a crash
        leaves the old file or the new one."""
        temporary = name + ".tmp"
        self.remove(temporary)  # a crash may have left one (or someone planted one)
        fd = _open(
            temporary,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW,
            FILE_MODE,
            dir_fd=self.fd,
            where=self,
        )
        try:
            os.fchmod(fd, FILE_MODE)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        self.sync()

    def move(self, name: str, to: Folder, new_name: str) -> None:
        """Rename the entry ``name`` to ``new_name`` in ``to`` (both directories synced).
        A rename moves the entry itself, never what a symlink points at."""
        os.rename(name, new_name, src_dir_fd=self.fd, dst_dir_fd=to.fd)
        to.sync()
        if to.fd != self.fd:
            self.sync()

    def remove(self, name: str) -> None:
        """Delete the entry ``name`` if there is one (a symlink is removed, not followed)."""
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return
        self.sync()

    def sync(self) -> None:
        """Make creations, renames and deletions in this directory durable."""
        os.fsync(self.fd)

    # -- helpers -------------------------------------------------------------------------

    def _open_writable(self, name: str) -> tuple[int, bool]:
        flags = os.O_RDWR | _NOFOLLOW
        try:
            fd = _open(name, flags | os.O_CREAT | os.O_EXCL, FILE_MODE, dir_fd=self.fd, where=self)
        except FileExistsError:
            fd = _open(name, flags, dir_fd=self.fd, where=self)
            created = False
        else:
            os.fchmod(fd, FILE_MODE)  # the umask may have taken bits
            created = True
        try:
            self._require_private_regular(fd, name)
        except BaseException:
            os.close(fd)
            raise
        return fd, created

    def _require_private_regular(self, fd: int, name: str) -> None:
        info = _require_regular(fd, self._name(name))
        if info.st_nlink > 1:
            # A hard link would let a write land in a file that also lives elsewhere.
            raise RefusedFile(
                errno.EMLINK, "refused: a daily file with more than one hard link", self._name(name)
            )

    def _name(self, name: str) -> str:
        return str(self.path / name)


@contextmanager
def open_folder(path: Path, *, create: bool) -> Iterator[Folder | None]:
    """``path`` as a folder (``None`` if missing and not ``create``; created 0700 with its
    missing parents if ``create``). The path itself must not be a symlink: callers pass a
    resolved path."""
    if create:
        make_private_directory(path)
    try:
        fd = _open(str(path), os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
    except FileNotFoundError:
        yield None
        return
    try:
        yield Folder(fd, path)
    finally:
        os.close(fd)


class WholeFile:
    """A file being written in a directory, named only by :meth:`name_as`."""

    def __init__(self, file: BinaryIO, hidden: Path | None) -> None:
        self.file = file
        self._hidden = hidden  # where the file system cannot keep a file without a name

    def name_as(self, path: Path, *, replace: bool) -> bool:
        """Make the file durable and give it the name ``path`` (in the directory it was made
        in), replacing what is there if ``replace``; else whether the name was free."""
        self.file.flush()
        os.fsync(self.file.fileno())
        source = str(self._hidden or f"/proc/self/fd/{self.file.fileno()}")
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            # A directory descriptor makes os.link a linkat that follows /proc's link to
            # the file (a plain link() would try to link the symlink itself).
            if not replace:
                try:
                    os.link(source, path.name, dst_dir_fd=directory)
                except FileExistsError:
                    return False
                return True
            step = f".{path.name}.{secrets.token_hex(8)}"
            os.link(source, step, dst_dir_fd=directory)
            try:
                os.replace(step, path.name, src_dir_fd=directory, dst_dir_fd=directory)
            except BaseException:
                os.unlink(step, dir_fd=directory)
                raise
            return True
        finally:
            os.close(directory)


@contextmanager
def whole_file(directory: Path) -> Iterator[WholeFile]:
    """A new 0600 file in ``directory`` without a name (Linux's ``O_TMPFILE``; elsewhere a
    hidden temporary name, removed at the end): gone with the process unless named."""
    hidden, fd = None, -1
    if hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd"):  # (named through /proc)
        try:
            fd = os.open(directory, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, FILE_MODE)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR):  # (a file system without)
                raise
    if fd < 0:
        fd, name = tempfile.mkstemp(dir=directory, prefix=".cambium.")
        hidden = Path(name)
    whole = WholeFile(os.fdopen(fd, "wb"), hidden)
    try:
        yield whole
    finally:
        whole.file.close()
        if hidden is not None:
            hidden.unlink(missing_ok=True)


def _open(
    name: str,
    flags: int,
    mode: int = FILE_MODE,
    *,
    dir_fd: int | None = None,
    where: Folder | None = None,
) -> int:
    """``os.open`` that reports a symlink or a wrong kind of entry as :class:`RefusedFile`."""
    try:
        return os.open(name, flags, mode, dir_fd=dir_fd)
    except OSError as exc:
        shown = str(where.path / name) if where is not None else name
        if exc.errno == errno.ELOOP:
            raise RefusedFile(exc.errno, "refused: a symlink", shown) from None
        if exc.errno in (errno.ENOTDIR, errno.EISDIR, errno.ENXIO):
            raise RefusedFile(
                exc.errno, "refused: not a regular file or directory", shown
            ) from None
        raise


def _make_private(name: str, dir_fd: int | None) -> None:
    """Set a directory just created to 0700: ``mkdir`` applies the umask, which may take
    bits away but also leave group and other bits on."""
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=dir_fd)
    try:
        os.fchmod(fd, DIRECTORY_MODE)
    finally:
        os.close(fd)


def _require_regular(fd: int, shown: str) -> os.stat_result:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise RefusedFile(errno.EINVAL, "refused: not a regular file", shown)
    return info


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _cut_back(fd: int, size: int) -> None:
    """Undo a partial append. If even that fails (the disk is gone), the error being
    raised already fails the delivery, and the next append starts on a line of its own."""
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError:
        pass


def scan_directory(folder: Path) -> list[os.DirEntry[str]]:
    """The entries of ``folder``; none if it does not exist (or is not a directory)."""
    try:
        return list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
