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

Searches rank the lines in the text index (:mod:`daemon.files.daily_rows` keeps the rows):
an append indexes its line in the same step, a claim and a merge move the day's rows
instead of reading them again, and before a search only the files whose size or mtime
changed are read. Live, claimed and archived lines are all searched, each once.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import date
from functools import partial
from pathlib import Path

import structlog

from daemon.core.days import InvalidDay, parse_day
from daemon.core.lines import lines_between, split_lines
from daemon.core.text_rows import ARCHIVED, CLAIMED, LIVE
from daemon.core.turns import InTurn
from daemon.files.daily_merge import SUFFIX as SUFFIX  # the day files' suffix, for others
from daemon.files.daily_merge import (
    Claim,
    archived_bytes,
    archived_lines,
    claims,
    file_name,
    merge,
    record_name,
    redacted_lines,
    staging_name,
)
from daemon.files.daily_rows import DailyRows
from daemon.files.file_rows import IndexedFile, signature_of
from daemon.files.hand_edits import HandEdits
from daemon.fs import Folder, RefusedFile, open_folder, scan_directory
from daemon.search.daily import DailyHit, DailyIndex, LineKey
from daemon.search.fusion import DenseRanker
from daemon.search.index import TextIndex
from daemon.search.memory_index import MemoryTextIndex

log = structlog.get_logger("cambium.daily")

# Told of redacted archive lines: the day, its archived (and claimed) lines before, and the
# numbers redacted.
Redacted = Callable[[date, Sequence[str], Collection[int]], None]

ARCHIVE = "archive"


class DailyLog:
    """The daily files in one directory. Appends, claims, merges and the index's upkeep
    are serialised per instance; searches rank the lines of ``index`` (by default one in
    memory). An index that is not writable (a store opened read-only) is only read.

    The directory is resolved once, here: if the configured path is a symlink, that is the
    user's choice; nothing beneath it is ever followed."""

    def __init__(
        self,
        directory: Path,
        dense: DenseRanker[LineKey] | None = None,
        *,
        index: TextIndex | None = None,
        look_every: float = 0.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = Path(os.path.realpath(directory))
        self.archive_directory = self.directory / ARCHIVE
        # Append, claim, merge and the index's rows; taken in turn, so that a note waits for
        # one file of a look at every file, not the whole look.
        self._lock = InTurn()
        self._refreshing = threading.Lock()  # one look at every file at a time
        self.rows = DailyRows(MemoryTextIndex() if index is None else index, split_lines)
        self._index = DailyIndex(self.rows.index, self.numbered_bytes, dense)
        self.hand_edits = HandEdits(look_every, monotonic)
        self.behind = False  # the last search found more changed files than it would read
        self._warned: set[str] = set()
        self._changed: list[Callable[[], None]] = []
        self._redacted: list[Redacted] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (without arguments, quickly) whenever a file's rows changed."""
        self._changed.append(listener)

    def on_redact(self, listener: Redacted) -> None:
        """Call ``listener(day, lines_before, numbers)`` when archived lines are redacted
        (``memory.forget``), before the call returns: the dense side deletes their vectors."""
        self._redacted.append(listener)

    # -- reading -------------------------------------------------------------------------

    def path(self, day: date, *, archived: bool = False) -> Path:
        """Where the day's live (or archived) file is, to show a person; every read and
        write goes through :mod:`daemon.fs` instead."""
        return (self.archive_directory if archived else self.directory) / file_name(day)

    def read(self, day: date, *, archived: bool = False) -> list[str] | None:
        """The day's lines (without line endings), or ``None`` if there is no such file
        (or only something that is not a regular file, which is skipped with a warning)."""
        data = self._bytes(day, archived)
        return None if data is None else split_lines(data)

    def _bytes(self, day: date, archived: bool) -> bytes | None:
        try:
            with open_folder(self.directory, create=False) as live:
                if live is None:
                    return None
                if not archived:
                    data = live.read(file_name(day))
                else:
                    with live.subfolder(ARCHIVE, create=False) as archive:
                        data = None if archive is None else archive.read(file_name(day))
        except RefusedFile as exc:
            self._warn_once(exc.filename, exc.strerror)
            return None
        return data

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
        claimed = {day for day, _ in claims(self.archive_directory)}
        return sorted(day for day in {*self.days(archived=False), *claimed} if day <= through)

    def _files(self, archived: bool) -> Iterator[tuple[date, os.DirEntry[str]]]:
        """The regular day files of the live or archive folder, in no particular order.
        A symlink, FIFO or device named like a day file is skipped with a warning."""
        folder = self.archive_directory if archived else self.directory
        if archived and os.path.islink(folder):
            self._warn_once(folder, "refused: a symlink")
            return
        for entry in scan_directory(folder):
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
                    self._warn_once(entry.path, "refused: not a regular file")
                    continue
                yield day, entry

    def evidence(self, daily_file: str, line_range: tuple[int, int]) -> DailyHit | None:
        """The lines a mark's evidence points at: ``daily_file`` is ``YYYY-MM-DD.md``, found
        archived, else live (consolidation numbers lines as the archive does; a day noted
        again after it was archived has a live file numbered from 1 again, holding other
        lines under the same numbers). ``None`` if neither holds that range."""
        if not daily_file.endswith(SUFFIX):
            raise InvalidDay(f"invalid daily file {daily_file!r}: expected YYYY-MM-DD{SUFFIX}")
        day = parse_day(daily_file.removesuffix(SUFFIX))
        return self.lines(day, True, line_range) or self.lines(day, False, line_range)

    def lines(self, day: date, archived: bool, line_range: tuple[int, int]) -> DailyHit | None:
        """Lines ``line_range`` of the day's archive (with its claim) or live file, if held."""
        start, end = line_range
        if not 1 <= start <= end:
            return None
        if (found := lines_between(self.numbered_bytes(day, archived), start, end)) is None:
            return None
        return DailyHit(day.isoformat(), "\n".join(found), (start, end), archived)

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
                live.append(file_name(day), line.encode() + b"\n")
                self._sync(live, file_name(day), day, LIVE)
            return True

    def claim(self, day: date) -> Claim | None:
        """Take the day's lines for consolidation: a claim an interrupted consolidation
        left, else the live file, renamed out of the way of appends. ``None`` if there is
        neither."""
        with self._lock, open_folder(self.directory, create=False) as live:
            if live is None:
                return None
            kind = live.kind(file_name(day))
            with live.subfolder(ARCHIVE, create=kind is not None) as archive:
                leftover = archive is not None and archive.kind(staging_name(day)) is not None
                if not leftover:
                    if kind is None:
                        return None
                    if kind != "file":
                        raise RefusedFile(
                            0, "refused: not a regular file", str(live.path / file_name(day))
                        )
                    assert archive is not None
                    # A record whose deletion a crash interrupted belongs to no claim yet.
                    archive.remove(record_name(day))
                    live.move(file_name(day), archive, staging_name(day))
                assert archive is not None
                offset = len(archived_lines(archive, day))
                if not leftover and self.rows.index.writable:
                    self.rows.claimed(day, offset)
                data = self._sync(archive, staging_name(day), day, CLAIMED, offset=offset)
                if data is None:
                    raise RefusedFile(0, "refused: the claim vanished", str(archive.path))
                return Claim(day, split_lines(data), offset, leftover)

    def merge(self, day: date) -> None:
        """Move the day's claim into the archive, appending to an archived file of the same
        day. Safe to call again after a crash at any point; without a claim it only
        finishes what an interrupted merge left."""
        with self._lock, open_folder(self.directory, create=False) as live:
            if live is None:
                return
            with live.subfolder(ARCHIVE, create=False) as archive:
                if archive is not None and merge(archive, day):
                    if self.rows.index.writable:
                        self.rows.merged(day)
                    self._sync(archive, file_name(day), day, ARCHIVED)

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
                before = [] if archive is None else archived_lines(archive, day)
                claimed = None if archive is None else archive.read(staging_name(day))
            now = live.read(file_name(day))
        return before + split_lines(claimed or b"") + split_lines(now or b"")

    def _sync(
        self, folder: Folder, name: str, day: date, state: str, *, offset: int = 0
    ) -> bytes | None:
        """Bring the group of the file ``name`` in step with it (the caller holds the
        lock); its bytes (``None``: no such file)."""
        try:
            stat = os.stat(name, dir_fd=folder.fd, follow_symlinks=False)
        except FileNotFoundError:
            stat = None
        data = folder.read(name)  # after the stat: a write in between is seen next time
        # No merge is half done here (a merge syncs once it ended; a redaction is refused
        # while one is), so the archive's bytes are all its own.
        if self.rows.index.writable:
            signature = None if stat is None or data is None else signature_of(stat, data)
            self.rows.sync(day.isoformat(), state, data, offset=offset, signature=signature)
            self.hand_edits.indexed(folder.path / name, signature)
            for listener in self._changed:
                listener()
        return data

    def _warn_once(self, path: object, reason: str | None) -> None:
        where = str(path)
        if where not in self._warned:
            self._warned.add(where)
            log.warning("daily file skipped", path=where, reason=reason)

    # -- forgetting ----------------------------------------------------------------------

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
        with self._lock, open_folder(self.directory, create=False) as live:
            if live is None:
                return 0
            with live.subfolder(ARCHIVE, create=False) as archive:
                if archive is None:
                    return 0
                for day, numbers in sorted(cited.items()):
                    redacted = self._redact_file(archive, day, set(numbers), marker)
                    if redacted:  # the index drops the old text (FTS5 'delete') at once
                        self._sync(archive, file_name(day), day, ARCHIVED)
                    changed += redacted
        return changed

    def _redact_file(self, archive: Folder, day: date, numbers: set[int], marker: str) -> int:
        data = archive.read(file_name(day))
        if data is None:
            return 0
        if archive.kind(record_name(day)) is not None:
            raise RefusedFile(0, "refused: a merge of this day is half done", file_name(day))
        redacted, changed = redacted_lines(data, numbers, marker.encode())
        if changed:
            claimed = split_lines(archive.read(staging_name(day)) or b"")
            before = split_lines(archived_bytes(archive, day, data)) + claimed
            archive.replace(file_name(day), redacted)
            for listener in self._redacted:
                listener(day, before, numbers)
        return changed

    # -- searching -----------------------------------------------------------------------

    def search(
        self, query: str, *, since: date | None, limit: int, most: int | None = None
    ) -> list[DailyHit]:
        """Ranked hits for ``query`` over the live, claimed and archived lines of the days
        from ``since`` on (``None``: all of them), most relevant first (see
        :meth:`DailyIndex.search <daemon.search.daily.DailyIndex.search>`). Files changed by
        hand are looked for first when a look is due (:mod:`daemon.files.hand_edits`), unless
        it would read over ``most`` files (a pass over years of files not indexed yet takes
        a minute): then the index as it is answers, the look stays due and :attr:`behind`
        says so."""
        if self.hand_edits.take_look():
            self.behind = not self.refresh(most=most)
            if self.behind:
                self.hand_edits.look_again()
        return self._index.search(query, since=since, limit=limit)

    def refresh(
        self, progress: Callable[[int, int], None] | None = None, most: int | None = None
    ) -> bool:
        """Bring the index in line with the files (see ``FileRows.keep_up``); whether it was
        done: not if over ``most`` files need reading (a stat of each tells)."""
        if most is not None and self.rows.to_read(self._day_files()) > most:
            return False
        with self._refreshing:
            if self.rows.keep_up(self._day_files, progress, hold=lambda: self._lock):
                for listener in self._changed:
                    listener()
        return True

    def stale(self) -> list[tuple[date, str, str]]:
        """The files the index is not in step with: (day, live|claimed|archived, why)."""
        with self._lock:
            stale = self.rows.stale(self._day_files())
        return [(date.fromisoformat(source), state, why) for source, state, why in stale]

    def numbered_lines(self, day: date, archived: bool) -> list[str]:
        """The day's live lines, or its archived and claimed lines in archive order: as
        the index numbers them."""
        return split_lines(self.numbered_bytes(day, archived))

    def numbered_bytes(self, day: date, archived: bool) -> bytes:
        """The bytes :meth:`numbered_lines` splits (a search splits only what it shows)."""
        if not archived:
            return self._bytes(day, archived=False) or b""
        try:
            with open_folder(self.archive_directory, create=False) as archive:
                if archive is None:
                    return b""
                kept = archived_bytes(archive, day, archive.read(file_name(day)) or b"")
                claimed = archive.read(staging_name(day)) or b""
        except RefusedFile as exc:
            self._warn_once(exc.filename, exc.strerror)
            return b""
        if claimed and kept and not kept.endswith(b"\n"):
            kept += b"\n"  # the archive's last line ends where the claim's first begins
        return kept + claimed

    def _day_files(self) -> list[IndexedFile]:
        """Every live, archived and claimed file, as the index's upkeep looks at them:
        oldest day first, each day's files in line order (archive, claim, live), so that an
        index built from scratch numbers its rows as appends do, and a recall's recent days
        are a narrow window of them (see :mod:`daemon.store.text_index`)."""
        listed = [(day, 0, ARCHIVED, entry) for day, entry in self._files(archived=True)]
        listed += [(day, 1, CLAIMED, entry) for day, entry in claims(self.archive_directory)]
        listed += [(day, 2, LIVE, entry) for day, entry in self._files(archived=False)]
        listed.sort(key=lambda file: file[:2])
        return [
            IndexedFile(
                day.isoformat(),
                state,
                partial(entry.stat, follow_symlinks=False),
                partial(self._indexed, day, state),
            )
            for day, _, state, entry in listed
        ]

    def _indexed(self, day: date, state: str) -> tuple[bytes, int]:
        """The bytes of the day's ``state`` file that the index holds, and the number of
        the line before them."""
        folder = self.directory if state == LIVE else self.archive_directory
        try:
            with open_folder(folder, create=False) as opened:
                data = None
                if opened is not None:
                    data = opened.read(staging_name(day) if state == CLAIMED else file_name(day))
                if opened is None or data is None:
                    raise FileNotFoundError  # gone since it was listed: skipped
                if state == ARCHIVED:
                    return archived_bytes(opened, day, data), 0
                if state == CLAIMED:
                    return data, len(archived_lines(opened, day))
                return data, 0
        except RefusedFile as exc:  # a planted symlink or FIFO: skipped, never a failed recall
            self._warn_once(exc.filename, exc.strerror)
            raise FileNotFoundError from exc
