"""The daily layer: one markdown file per day, appended to during the day and archived after
the nightly consolidation. This module keeps the files; ranking their lines against a query
is :mod:`daemon.search.daily`'s, fed from here.

Live files are ``<directory>/YYYY-MM-DD.md``, archived ones ``<directory>/archive/
YYYY-MM-DD.md``. A path is only ever built from a :class:`~datetime.date`; strings from the
outside go through :func:`parse_day` first, so nothing like ``../../etc/passwd`` can name a
file. Lines are split on ``\\n`` alone (a trailing ``\\r`` is dropped), so line numbers
agree with any editor, and they are 1-indexed.

Every write goes through :mod:`daemon.fs`: entries of the (resolved) daily directory
and its ``archive/``, opened by name relative to the open directory, never through a
symlink, never a FIFO or a hard-linked file; appends are whole lines or nothing, fsynced
before they return; whatever is created is 0600 / 0700.

A consolidation first **claims** the day: the live file is renamed to a hidden staging file
inside ``archive/``, under the lock appends take. What it read is exactly what the claim
holds; a line appended afterwards starts a new live file, left for the next consolidation.
After its marks are stored, the claim is **merged** into the archive:

1. if the day is not archived yet, the staging file is renamed into place; otherwise the
   archive's size is first recorded in a hidden record file, and the staging bytes are
   appended only as far as the archive, read from that recorded size, does not hold them
   already;
2. the staging file is deleted, then the record.

Each step is fsynced before the next, and a claim a crash left behind is found again by the
next claim, with the same lines at the same positions. Seen whole, a day's lines are the
archive's (up to a recorded size), then the claim's, then the live file's: that sequence
only ever grows, which is what lets a redelivered note find out whether it was appended.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import structlog

from daemon.core.days import InvalidDay, parse_day
from daemon.fs import Folder, RefusedFile, open_folder, read_regular
from daemon.search.daily import DailyHit, DailyIndex, LineKey
from daemon.search.fusion import DenseRanker

log = structlog.get_logger("cambium.daily")

SUFFIX = ".md"
ARCHIVE = "archive"


@dataclass(frozen=True, slots=True)
class Claim:
    """A day's lines taken for consolidation. ``offset`` is how many lines the archive
    holds before them, so line ``n`` of the claim becomes archive line ``offset + n``.
    ``leftover``: the claim was made by an earlier, interrupted consolidation."""

    day: date
    lines: list[str]
    offset: int
    leftover: bool


@dataclass(frozen=True, slots=True)
class _CachedFile:
    signature: tuple[int, int]  # (mtime_ns, size) when it was read
    lines: tuple[str, ...]


def _name(day: date) -> str:
    return f"{day.isoformat()}{SUFFIX}"


def _staging_name(day: date) -> str:
    return f".{day.isoformat()}{SUFFIX}.incoming"


def _record_name(day: date) -> str:
    return f".{day.isoformat()}{SUFFIX}.merge"


class DailyLog:
    """The daily files in one directory. Appends, claims and merges are serialised per
    instance; searches cache each file's lines until the file changes, and hand them to
    the layer's :class:`~daemon.search.daily.DailyIndex`.

    The directory is resolved once, here: if the configured path is a symlink, that is the
    user's choice; nothing beneath it is ever followed."""

    def __init__(self, directory: Path, dense: DenseRanker[LineKey] | None = None) -> None:
        self.directory = Path(os.path.realpath(directory))
        self.archive_directory = self.directory / ARCHIVE
        self._lock = threading.Lock()  # append, claim and merge
        self._cache_lock = threading.Lock()  # the search cache and its index
        self._cache: dict[tuple[date, bool], _CachedFile] = {}
        self._index = DailyIndex(dense)
        self._dense = dense
        self._warned: set[str] = set()

    # -- reading -------------------------------------------------------------------------

    def path(self, day: date, *, archived: bool = False) -> Path:
        """Where the day's live (or archived) file is, to show a person; every read and
        write goes through :mod:`daemon.fs` instead."""
        return (self.archive_directory if archived else self.directory) / _name(day)

    def read(self, day: date, *, archived: bool = False) -> list[str] | None:
        """The day's lines (without line endings), or ``None`` if there is no such file
        (or only something that is not a regular file, which is skipped with a warning)."""
        try:
            with open_folder(self.directory, create=False) as live:
                if live is None:
                    return None
                if not archived:
                    data = live.read(_name(day))
                else:
                    with live.subfolder(ARCHIVE, create=False) as archive:
                        data = None if archive is None else archive.read(_name(day))
        except RefusedFile as exc:
            self._warn_once(exc)
            return None
        return None if data is None else _split_lines(data)

    def position(self, day: date) -> int:
        """How many lines the day holds in all: archived, claimed and live. Appends only
        ever add lines after this position."""
        with self._lock:
            return len(self._day_lines(day))

    def days(self, *, archived: bool) -> list[date]:
        """The days that have a regular file, oldest first. Other files are ignored."""
        return sorted(day for day, _ in self._files(archived))

    def unconsolidated_days(self, through: date) -> list[date]:
        """Days up to ``through`` with a live file or a claim not yet merged, oldest first."""
        claimed = set()
        for entry in _scan(self.archive_directory):
            name = entry.name
            if name.startswith(".") and name.endswith(f"{SUFFIX}.incoming"):
                try:
                    claimed.add(parse_day(name[1:].removesuffix(f"{SUFFIX}.incoming")))
                except InvalidDay:
                    continue
        return sorted(day for day in {*self.days(archived=False), *claimed} if day <= through)

    def _files(self, archived: bool) -> Iterator[tuple[date, os.DirEntry[str]]]:
        """The regular day files of the live or archive folder, in no particular order.
        A symlink, FIFO or device named like a day file is skipped with a warning."""
        folder = self.archive_directory if archived else self.directory
        if archived and os.path.islink(folder):
            self._warn_once(RefusedFile(0, "refused: a symlink", str(folder)))
            return
        for entry in _scan(folder):
            if entry.name.endswith(SUFFIX):
                try:
                    day = parse_day(entry.name.removesuffix(SUFFIX))
                except InvalidDay:
                    continue
                try:
                    regular = entry.is_file(follow_symlinks=False)
                except OSError:
                    continue  # gone since it was listed
                if not regular:
                    self._warn_once(RefusedFile(0, "refused: not a regular file", entry.path))
                    continue
                yield day, entry

    def evidence(self, daily_file: str, line_range: tuple[int, int]) -> DailyHit | None:
        """The lines a mark's evidence points at: ``daily_file`` is ``YYYY-MM-DD.md``, found
        live or else archived. ``None`` if neither file holds that range."""
        if not daily_file.endswith(SUFFIX):
            raise InvalidDay(f"invalid daily file {daily_file!r}: expected YYYY-MM-DD{SUFFIX}")
        day = parse_day(daily_file.removesuffix(SUFFIX))
        start, end = line_range
        for archived in (False, True):
            lines = self.read(day, archived=archived)
            if lines is not None and 1 <= start <= end <= len(lines):
                return DailyHit(day.isoformat(), "\n".join(lines[start - 1 : end]), (start, end))
        return None

    # -- writing -------------------------------------------------------------------------

    def append(self, day: date, line: str, *, unless_after: int | None = None) -> bool:
        """Append one line to the day's live file, creating it, and make it durable.

        With ``unless_after`` (a :meth:`position` taken earlier), nothing is appended if the
        day already holds ``line`` after that position: a retried append is not repeated.
        Whether it appended."""
        if "\n" in line or "\r" in line:
            raise ValueError("a daily line must not contain a line break")
        with self._lock:
            if unless_after is not None and line in self._day_lines(day)[unless_after:]:
                return False
            with open_folder(self.directory, create=True) as live:
                assert live is not None
                live.append(_name(day), line.encode("utf-8") + b"\n")
            return True

    def claim(self, day: date) -> Claim | None:
        """Take the day's lines for consolidation: a claim an interrupted consolidation
        left, else the live file, renamed out of the way of appends. ``None`` if there is
        neither."""
        with self._lock, open_folder(self.directory, create=False) as live:
            if live is None:
                return None
            kind = live.kind(_name(day))
            with live.subfolder(ARCHIVE, create=kind is not None) as archive:
                leftover = archive is not None and archive.kind(_staging_name(day)) is not None
                if not leftover:
                    if kind is None:
                        return None
                    if kind != "file":
                        raise RefusedFile(
                            0, "refused: not a regular file", str(live.path / _name(day))
                        )
                    assert archive is not None
                    # A record whose deletion a crash interrupted belongs to no claim yet.
                    archive.remove(_record_name(day))
                    live.move(_name(day), archive, _staging_name(day))
                assert archive is not None
                data = archive.read(_staging_name(day))
                if data is None:
                    raise RefusedFile(0, "refused: the claim vanished", str(archive.path))
                return Claim(day, _split_lines(data), len(self._archived(archive, day)), leftover)

    def merge(self, day: date) -> None:
        """Move the day's claim into the archive, appending to an archived file of the same
        day. Safe to call again after a crash at any point; without a claim it only
        finishes what an interrupted merge left."""
        with self._lock, open_folder(self.directory, create=False) as live:
            if live is None:
                return
            with live.subfolder(ARCHIVE, create=False) as archive:
                if archive is not None:
                    _merge(archive, day)

    def archive(self, day: date) -> None:
        """Claim and merge the day, finishing an interrupted archive first: every line the
        day held is archived."""
        self.merge(day)
        if self.claim(day) is not None:
            self.merge(day)

    def _day_lines(self, day: date) -> list[str]:
        """The day's lines, seen whole: archived, claimed, live (the caller holds the lock)."""
        with open_folder(self.directory, create=False) as live:
            if live is None:
                return []
            with live.subfolder(ARCHIVE, create=False) as archive:
                before = [] if archive is None else self._archived(archive, day)
                claimed = None if archive is None else archive.read(_staging_name(day))
            now = live.read(_name(day))
        return before + _split_lines(claimed or b"") + _split_lines(now or b"")

    @staticmethod
    def _archived(archive: Folder, day: date) -> list[str]:
        """The archive's lines before any merge in progress."""
        data = archive.read(_name(day)) or b""
        if archive.kind(_staging_name(day)) is not None:
            recorded = archive.read(_record_name(day))
            if recorded is not None:
                data = data[: int(recorded)]
        return _split_lines(data)

    def _warn_once(self, problem: RefusedFile) -> None:
        where = str(problem.filename)
        if where not in self._warned:
            self._warned.add(where)
            log.warning("daily file skipped", path=where, reason=problem.strerror)

    # -- forgetting ----------------------------------------------------------------------

    def archived_lines(self, cited: Mapping[date, Collection[int]]) -> list[str]:
        """The texts of the archived lines ``cited`` (by day, 1-indexed numbers that exist)."""
        found = []
        for day, numbers in sorted(cited.items()):
            lines = self.read(day, archived=True) or []
            found += [lines[n - 1] for n in sorted(numbers) if 1 <= n <= len(lines)]
        return found

    def live_lines(self, wanted: Callable[[str], bool]) -> list[tuple[date, int]]:
        """The (day, 1-indexed number) of every live line ``wanted`` accepts, oldest first:
        what a forget leaves to the person, whose files these are."""
        return [
            (day, number)
            for day in self.days(archived=False)
            for number, line in enumerate(self.read(day) or [], start=1)
            if wanted(line)
        ]

    def redact_archive(self, cited: Mapping[date, Collection[int]], marker: str) -> int:
        """Replace the archived lines ``cited`` by ``marker`` (``memory.forget``), so every
        other line keeps its number; each file is rewritten whole and atomically (a crash
        leaves the old file or the new one). The lines' embeddings, and those of their
        neighbours (whose window holds them), are deleted, and the index drops their text
        at once. How many lines changed. Refused while a merge of the day is half done (its
        record counts the archive's bytes): the forget is retried after the merge ends."""
        if "\n" in marker or "\r" in marker:
            raise ValueError("a marker must not contain a line break")
        changed = 0
        with self._lock, self._cache_lock, open_folder(self.directory, create=False) as live:
            if live is None:
                return 0
            self._refresh()  # the index knows the lines' embeddings, to erase them
            with live.subfolder(ARCHIVE, create=False) as archive:
                for day, numbers in sorted(cited.items()):
                    if archive is not None:
                        changed += self._redact_file(archive, day, set(numbers), marker)
            self._refresh()
        return changed

    def _redact_file(self, archive: Folder, day: date, numbers: set[int], marker: str) -> int:
        data = archive.read(_name(day))
        if data is None:
            return 0
        if archive.kind(_record_name(day)) is not None:
            raise RefusedFile(0, "refused: a merge of this day is half done", _name(day))
        lines = data.split(b"\n")
        wanted = marker.encode("utf-8")
        changed = 0
        for number in sorted(numbers):
            if not 1 <= number <= len(lines) or (number == len(lines) and not lines[-1]):
                continue
            ending = b"\r" if lines[number - 1].endswith(b"\r") else b""
            if lines[number - 1] != wanted + ending:
                lines[number - 1] = wanted + ending
                changed += 1
        if changed:
            if self._dense is not None:
                for number in {n + step for n in numbers for step in (-1, 0, 1)}:
                    self._dense.erase((day, True, number))
            archive.replace(_name(day), b"\n".join(lines))
        return changed

    # -- searching -----------------------------------------------------------------------

    def search(self, query: str, *, since: date | None, limit: int) -> list[DailyHit]:
        """Ranked hits for ``query`` over the live and archived files of the days from
        ``since`` on (``None``: all of them), most relevant first (see
        :meth:`DailyIndex.search <daemon.search.daily.DailyIndex.search>`)."""
        with self._cache_lock:
            self._refresh()
            return self._index.search(query, since=since, limit=limit)

    def prepare_search(self) -> None:
        """Read what changed and embed its lines (with a dense ranker) now, so that the
        next search does not wait for it."""
        with self._cache_lock:
            self._refresh()
            self._index.flush()

    def _refresh(self) -> None:
        """Bring the cache and index in line with the files on disk."""
        present: set[tuple[date, bool]] = set()
        for archived in (False, True):
            for day, entry in self._files(archived):
                try:
                    cached = self._load(entry, self._cache.get((day, archived)))
                except FileNotFoundError:
                    continue  # archived or deleted since it was listed
                except RefusedFile as exc:  # replaced by a FIFO or symlink since it was listed
                    self._warn_once(exc)
                    continue
                present.add((day, archived))
                if cached is not None:
                    self._replace(day, archived, cached)
        for gone in self._cache.keys() - present:
            self._replace(*gone, None)

    def _replace(self, day: date, archived: bool, cached: _CachedFile | None) -> None:
        if cached is None:
            self._cache.pop((day, archived), None)
        else:
            self._cache[(day, archived)] = cached
        self._index.replace(day, archived, None if cached is None else cached.lines)

    @staticmethod
    def _load(entry: os.DirEntry[str], previous: _CachedFile | None) -> _CachedFile | None:
        """The file's contents if they changed since ``previous``, else ``None``."""
        stat = entry.stat(follow_symlinks=False)
        signature = (stat.st_mtime_ns, stat.st_size)
        if previous is not None and previous.signature == signature:
            return None
        # The signature is taken before reading: a write in between makes the next search
        # read the file again instead of trusting stale contents.
        data = read_regular(Path(entry.path), follow_symlinks=False)
        return _CachedFile(signature, tuple(_split_lines(data)))


def _split_lines(data: bytes) -> list[str]:
    """Lines split on ``\\n`` only, so numbering matches what an editor shows; a final
    newline ends the last line rather than opening an empty one."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _scan(folder: Path) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _merge(archive: Folder, day: date) -> None:
    """Step 1 and 2 of the merge (see the module's docstring); the caller holds the lock."""
    staging, record, target = _staging_name(day), _record_name(day), _name(day)
    kind = archive.kind(staging)
    if kind is None:
        # Either nothing was pending, or only the record's deletion was left to do.
        archive.remove(record)
        return
    if kind != "file":
        raise RefusedFile(0, "refused: not a regular file", str(archive.path / staging))
    if archive.kind(target) is None:
        archive.move(staging, archive, target)
        return
    recorded = archive.read(record)
    current = archive.read(target) or b""
    if recorded is not None:
        base = int(recorded)
    else:
        base = len(current)
        archive.replace(record, f"{base}\n".encode("ascii"))
    incoming = archive.read(staging) or b""
    last = current[base - 1 : base] if base else b"\n"
    payload = (b"" if last == b"\n" else b"\n") + incoming
    if incoming and not incoming.endswith(b"\n"):
        payload += b"\n"
    already = current[base:]
    if already.startswith(payload):
        missing = b""
    elif payload.startswith(already):
        missing = payload[len(already) :]  # an append was cut short
    else:
        # The archive changed under us in a way no interrupted run explains (edited by
        # hand?). Appending everything may repeat lines but loses none.
        log.warning("daily archive changed during a merge", day=day.isoformat())
        missing = payload
    if missing:
        archive.append(target, missing, whole_lines=False)
    # The staging file goes before the record: a staging file without a record means
    # "nothing appended yet", so the record must outlive it.
    archive.remove(staging)
    archive.remove(record)
