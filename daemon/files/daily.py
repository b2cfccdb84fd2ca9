"""The daily layer: one markdown file per day, appended to during the day and archived after
the nightly consolidation.

Live files are ``<directory>/YYYY-MM-DD.md``, archived ones ``<directory>/archive/
YYYY-MM-DD.md``. A path is only ever built from a :class:`~datetime.date`; strings from the
outside go through :func:`parse_day` first, so nothing like ``../../etc/passwd`` can name a
file. Lines are split on ``\\n`` alone (a trailing ``\\r`` is dropped), so line numbers
agree with any editor, and they are 1-indexed.

Archiving never loses or duplicates a line, however often it is interrupted and retried:

1. the live file is renamed to a hidden staging file inside ``archive/``;
2. if the day is not archived yet, the staging file is renamed into place; otherwise the
   archive's size is first recorded in a hidden record file, and the staging bytes are
   appended only as far as the archive, read from that recorded size, does not hold them
   already;
3. the staging file is deleted, then the record.

Each step is fsynced before the next, and every call first finishes whatever an earlier
call left half done.
"""

from __future__ import annotations

import heapq
import os
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import structlog

from daemon.files.fusion import (
    DENSE_CANDIDATES,
    DENSE_WEIGHT,
    FUSION_K,
    DenseRanker,
    HybridIndex,
    ranking,
    reciprocal_rank_fusion,
)

log = structlog.get_logger("cambium.daily")

_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
SUFFIX = ".md"

# In ranking, a line borrows this share of its neighbours' scores: in a log, the line that
# answers something often sits next to the line that names it.
NEIGHBOUR_WEIGHT = 0.4
# BM25's length discount for lines, lower than for documents: a line that says more is not
# less about each thing it says. Both measured on the LoCoMo dev set (bench/locomo.py):
# recall@10 0.749 with 0.3 and the usual 0.75, 0.780 with these.
LINE_B = 0.4


class InvalidDay(ValueError):
    """A day that is not a real calendar date written ``YYYY-MM-DD``."""


def parse_day(value: str) -> date:
    """``value`` as a date, if it is exactly ``YYYY-MM-DD`` and a real calendar date."""
    if _DAY.fullmatch(value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise InvalidDay(f"invalid day {value!r}: expected a real calendar date as YYYY-MM-DD")


@dataclass(frozen=True, slots=True)
class DailyHit:
    date: str  # YYYY-MM-DD
    excerpt: str
    line_range: tuple[int, int]  # 1-indexed, inclusive


# Where a line lives: its day, whether it is archived, and its 1-indexed line number.
_LineKey = tuple[date, bool, int]


@dataclass(frozen=True, slots=True)
class _CachedFile:
    signature: tuple[int, int]  # (mtime_ns, size) when it was read
    lines: tuple[str, ...]


class DailyLog:
    """The daily files in one directory. Appends and archives are serialised per instance;
    searches cache each file's lines until the file changes."""

    def __init__(self, directory: Path, dense: DenseRanker[_LineKey] | None = None) -> None:
        self.directory = directory
        self.archive_directory = directory / "archive"
        self._lock = threading.Lock()  # append and archive
        self._cache_lock = threading.Lock()  # the search cache and its index
        self._cache: dict[tuple[date, bool], _CachedFile] = {}
        self._index: HybridIndex[_LineKey] = HybridIndex(dense, b=LINE_B)

    # -- paths ---------------------------------------------------------------------------

    def _path(self, day: date, *, archived: bool = False) -> Path:
        folder = self.archive_directory if archived else self.directory
        return folder / f"{day.isoformat()}{SUFFIX}"

    def _staging_path(self, day: date) -> Path:
        return self.archive_directory / f".{day.isoformat()}{SUFFIX}.incoming"

    def _record_path(self, day: date) -> Path:
        return self.archive_directory / f".{day.isoformat()}{SUFFIX}.merge"

    # -- reading -------------------------------------------------------------------------

    def read(self, day: date, *, archived: bool = False) -> list[str] | None:
        """The day's lines (without line endings), or ``None`` if there is no such file."""
        try:
            data = self._path(day, archived=archived).read_bytes()
        except FileNotFoundError:
            return None
        return _split_lines(data)

    def archived_line_count(self, day: date) -> int:
        """How many lines the archive holds for ``day``: lines archived next are numbered
        from here on. An interrupted archive is finished first, or its lines, still on
        their way in, would be missing from the count."""
        with self._lock:
            self._finish_archive(day)
            return len(self.read(day, archived=True) or [])

    def days(self, *, archived: bool) -> list[date]:
        """The days that have a file, oldest first. Other files are ignored."""
        return sorted(day for day, _ in self._files(archived))

    def _files(self, archived: bool) -> Iterator[tuple[date, os.DirEntry[str]]]:
        """The day files of the live or archive folder, in no particular order."""
        try:
            entries = list(os.scandir(self.archive_directory if archived else self.directory))
        except FileNotFoundError:
            return
        for entry in entries:
            if entry.name.endswith(SUFFIX):
                try:
                    yield parse_day(entry.name.removesuffix(SUFFIX)), entry
                except InvalidDay:
                    continue

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

    def append(self, day: date, line: str) -> None:
        """Append one line to the day's live file, creating it, and make it durable."""
        if "\n" in line or "\r" in line:
            raise ValueError("a daily line must not contain a line break")
        with self._lock:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self._path(day)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                size = os.fstat(fd).st_size
                # A file last saved by an editor may lack its final newline; without one
                # the new line would be glued onto the last.
                separator = b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""
                _write_all(fd, separator + line.encode("utf-8") + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            if size == 0:
                _fsync_directory(self.directory)

    def archive(self, day: date) -> None:
        """Move the day's live file into the archive, appending to an archived file of the
        same day. Safe to call again after a crash at any point; without a live file it
        only finishes an interrupted archive, if any."""
        with self._lock:
            # The staging name must be free before the live file can take it.
            self._finish_archive(day)
            live = self._path(day)
            if not live.exists():
                return
            self.archive_directory.mkdir(exist_ok=True)
            os.rename(live, self._staging_path(day))
            _fsync_directory(self.archive_directory)
            _fsync_directory(self.directory)
            self._finish_archive(day)

    def _finish_archive(self, day: date) -> None:
        staging, record = self._staging_path(day), self._record_path(day)
        target = self._path(day, archived=True)
        if not staging.exists():
            # Either nothing was pending, or only the record's deletion was left to do.
            _remove(record, self.archive_directory)
            return
        if not target.exists():
            os.rename(staging, target)
            _fsync_directory(self.archive_directory)
            return
        if record.exists():
            base = int(record.read_text(encoding="ascii"))
        else:
            base = target.stat().st_size
            _write_atomically(record, f"{base}\n".encode("ascii"))
        incoming = staging.read_bytes()
        with open(target, "r+b") as archive:
            archive.seek(max(base - 1, 0))
            last = archive.read(1) if base else b"\n"
            payload = (b"" if last == b"\n" else b"\n") + incoming
            if incoming and not incoming.endswith(b"\n"):
                payload += b"\n"
            archive.seek(base)
            already = archive.read()
            if already.startswith(payload):
                missing = b""
            elif payload.startswith(already):
                missing = payload[len(already) :]  # an append was cut short
            else:
                # The archive changed under us in a way no interrupted run explains (edited
                # by hand?). Appending everything may repeat lines but loses none.
                log.warning("daily archive changed during a merge", day=day.isoformat())
                missing = payload
            archive.seek(0, os.SEEK_END)
            archive.write(missing)
            archive.flush()
            os.fsync(archive.fileno())
        # The staging file goes before the record: a staging file without a record means
        # "nothing appended yet", so the record must outlive it.
        _remove(staging, self.archive_directory)
        _remove(record, self.archive_directory)

    # -- searching -----------------------------------------------------------------------

    def search(self, query: str, *, archived_since: date | None, limit: int) -> list[DailyHit]:
        """Ranked hits for ``query`` over the live files and the archived files from
        ``archived_since`` on (``None``: all of them), most relevant first.

        Lines are ranked, each by its own score plus a share of its matching neighbours'.
        The best lines are taken until ``limit`` hits are filled; taken lines adjacent in
        a file form one hit, ranked by its best line.
        """
        with self._cache_lock:
            self._refresh()

            def wanted(key: _LineKey) -> bool:
                day, archived, _ = key
                return not archived or archived_since is None or day >= archived_since

            where = None if archived_since is None else wanted
            scores = _with_neighbours(self._index.scores(query, where=where))
            if self._index.dense is not None:
                similar = self._index.dense.nearest(query, DENSE_CANDIDATES, where=where)
                scores = reciprocal_rank_fusion(
                    [ranking(scores, _line_order), ranking(similar, _line_order)],
                    weights=(1.0, DENSE_WEIGHT),
                    k=FUSION_K,
                )
            # Best first; on equal scores the newer day, then the earlier line.
            candidates = [(-score, *_line_order(key), key) for key, score in scores.items()]
            # Only as many lines as the hits need are taken: pop them in order from a heap
            # rather than sorting every matching line.
            heapq.heapify(candidates)
            ranked = (heapq.heappop(candidates)[-1] for _ in range(len(candidates)))
            return [
                DailyHit(
                    span.day.isoformat(),
                    "\n".join(
                        self._cache[(span.day, span.archived)].lines[span.start - 1 : span.end]
                    ),
                    (span.start, span.end),
                )
                for span in _spans(ranked, limit)
            ]

    def prepare_search(self) -> None:
        """Read what changed and embed its lines (with a dense ranker) now, so that the
        next search does not wait for it."""
        with self._cache_lock:
            self._refresh()
            if self._index.dense is not None:
                self._index.dense.flush()

    def _refresh(self) -> None:
        """Bring the cache and index in line with the files on disk."""
        present: set[tuple[date, bool]] = set()
        for archived in (False, True):
            for day, entry in self._files(archived):
                try:
                    cached = self._load(entry, self._cache.get((day, archived)))
                except FileNotFoundError:
                    continue  # archived or deleted since it was listed
                present.add((day, archived))
                if cached is not None:
                    self._replace(day, archived, cached)
        for gone in self._cache.keys() - present:
            self._replace(*gone, None)

    @staticmethod
    def _load(entry: os.DirEntry[str], previous: _CachedFile | None) -> _CachedFile | None:
        """The file's contents if they changed since ``previous``, else ``None``."""
        stat = entry.stat()
        signature = (stat.st_mtime_ns, stat.st_size)
        if previous is not None and previous.signature == signature:
            return None
        # The signature is taken before reading: a write in between makes the next search
        # read the file again instead of trusting stale contents.
        with open(entry.path, "rb") as file:
            return _CachedFile(signature, tuple(_split_lines(file.read())))

    def _replace(self, day: date, archived: bool, cached: _CachedFile | None) -> None:
        previous = self._cache.pop((day, archived), None)
        if previous is not None:
            for number in range(1, len(previous.lines) + 1):
                self._index.remove((day, archived, number))
        if cached is not None:
            self._cache[(day, archived)] = cached
            for number, line in enumerate(cached.lines, start=1):
                self._index.add((day, archived, number), line)


def _with_neighbours(raw: dict[_LineKey, float]) -> dict[_LineKey, float]:
    """Each line's score plus a share of its neighbours' (see ``NEIGHBOUR_WEIGHT``)."""
    scores = {}
    for key, score in raw.items():
        day, archived, number = key
        neighbours = raw.get((day, archived, number - 1), 0.0) + raw.get(
            (day, archived, number + 1), 0.0
        )
        scores[key] = score + NEIGHBOUR_WEIGHT * neighbours
    return scores


def _line_order(key: _LineKey) -> tuple[int, int]:
    """Between equal scores: the newer day first, then the earlier line."""
    day, _, number = key
    return -day.toordinal(), number


@dataclass(slots=True)
class _Span:
    """Adjacent taken lines of one file; ``rank`` is that of its best line."""

    day: date
    archived: bool
    start: int
    end: int
    rank: int


def _spans(ranked: Iterable[_LineKey], limit: int) -> list[_Span]:
    """Take lines in rank order until one more would open hit number ``limit + 1``;
    adjacent taken lines join one span. The spans, best first."""
    by_end: dict[_LineKey, _Span] = {}
    by_start: dict[_LineKey, _Span] = {}
    count = 0
    for rank, (day, archived, number) in enumerate(ranked):
        left = by_end.pop((day, archived, number - 1), None)
        right = by_start.pop((day, archived, number + 1), None)
        if left is not None and right is not None:
            # The line bridges two spans: they become one.
            left.end, left.rank = right.end, min(left.rank, right.rank)
            span = left
            count -= 1
        elif left is not None:
            left.end = number
            span = left
        elif right is not None:
            right.start = number
            span = right
        elif count >= limit:
            break
        else:
            span = _Span(day, archived, number, number, rank)
            count += 1
        by_start[(day, archived, span.start)] = span
        by_end[(day, archived, span.end)] = span
    return sorted(by_start.values(), key=lambda span: span.rank)


def _split_lines(data: bytes) -> list[str]:
    """Lines split on ``\\n`` only, so numbering matches what an editor shows; a final
    newline ends the last line rather than opening an empty one."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_directory(directory: Path) -> None:
    """Make renames, creations and deletions in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path, directory: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        return
    _fsync_directory(directory)


def _write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old file or the new one."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    _fsync_directory(path.parent)
