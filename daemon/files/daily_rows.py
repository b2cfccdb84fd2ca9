"""The daily files' rows in the text index, kept in step with the files.

Every file of a day is a group of rows (:class:`~daemon.search.index.Group`): the live file
(``live``), a claim a consolidation holds (``claimed``) and the archive (``archived``). A
claim's lines are numbered as the archive will number them, so when the claim is merged its
rows only change state, and while it is held the day's lines are each indexed once: the
archive's (up to a merge's recorded size), the claim's, the live file's.

A group is brought in step with its file (:meth:`DailyRows.sync`) by comparing each line's
digest with its row's: only what differs is stemmed and written, and the file's signature
(size, mtime, SHA-256) is kept with the rows. :meth:`DailyRows.refresh` looks at every file
and syncs only those whose size or mtime changed and whose hash then differs, so a start
with an up-to-date index reads no unchanged file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from daemon.core.text_rows import ARCHIVED, CLAIMED, DAILY, LIVE, Group, Row, Signature
from daemon.search.index import TextIndex, digest_of, row_of


@dataclass(frozen=True, slots=True)
class DayFile:
    """One file of a day as :meth:`DailyRows.refresh` sees it: which group it is, how to
    stat it and how to read its indexed bytes (and the number of the line before its
    first)."""

    day: date
    state: str
    stat: Callable[[], os.stat_result]
    read: Callable[[], tuple[bytes, int]]


def group(day: date, state: str) -> Group:
    return Group(DAILY, day.isoformat(), state)


def signature_of(stat: os.stat_result, data: bytes) -> Signature:
    return Signature(stat.st_size, stat.st_mtime_ns, hashlib.sha256(data).hexdigest())


class DailyRows:
    """The daily layer's groups in ``index``. The caller serialises calls per day."""

    def __init__(self, index: TextIndex, split: Callable[[bytes], list[str]]) -> None:
        self.index = index
        self._split = split
        self.reads = 0  # files read to sync them (what a start with a current index avoids)
        # The signatures as this process last wrote or read them: one query per process, not
        # per search. Another process writing the index (a rebuild) can only make one stale,
        # which costs a read of the file and no write (its digests agree).
        self._known: dict[tuple[str, str], Signature] | None = None

    def _signatures(self) -> dict[tuple[str, str], Signature]:
        if self._known is None:
            self._known = self.index.signatures(DAILY)
        return self._known

    def _write(
        self, where: Group, rows: list[Row], removed: list[int], signature: Signature | None
    ) -> None:
        self.index.write(where, rows, removed, signature)
        known = self._signatures()
        if signature is None:
            known.pop((where.source, where.state), None)
        else:
            known[(where.source, where.state)] = signature

    def _forget(self, where: Group) -> None:
        self._signatures().pop((where.source, where.state), None)

    def sync(
        self,
        day: date,
        state: str,
        data: bytes | None,
        *,
        offset: int = 0,
        signature: Signature | None = None,
    ) -> None:
        """Make the group of the day's ``state`` file hold ``data``'s lines (numbered after
        ``offset``); ``None``: the file is gone."""
        where = group(day, state)
        if data is None:
            self.index.drop(where)
            self._forget(where)
            return
        held = self.index.digests(where)
        lines = self._split(data)
        rows: list[Row] = []
        for number, line in enumerate(lines, start=offset + 1):
            if held.get(number) != digest_of(line):
                rows.append(row_of(number, line))
        kept = range(offset + 1, offset + len(lines) + 1)
        removed = [part for part in held if part not in kept]
        self._write(where, rows, removed, signature)

    def claimed(self, day: date, offset: int) -> None:
        """The live file became a claim: its rows are the claim's, numbered after the
        archive's ``offset`` lines."""
        self.index.move(group(day, LIVE), group(day, CLAIMED), offset)
        self._forget(group(day, LIVE))

    def merged(self, day: date) -> None:
        """The claim is in the archive now: its rows are archived rows."""
        self.index.move(group(day, CLAIMED), group(day, ARCHIVED), 0)
        self._forget(group(day, CLAIMED))

    def refresh(
        self, files: list[DayFile], progress: Callable[[int, int], None] | None = None
    ) -> set[date]:
        """Sync every file of ``files`` that changed and drop the groups of files gone; the
        days that changed. ``progress`` is told (files looked at, files) after each file."""
        known = dict(self._signatures())
        changed: set[date] = set()
        for done, file in enumerate(files, start=1):
            kept = known.pop((file.day.isoformat(), file.state), None)
            read = self._read_if_changed(file, kept)
            if read is not None:
                data, offset, signature = read
                if kept is not None and kept.sha256 == signature.sha256:
                    self._write(group(file.day, file.state), [], [], signature)
                else:
                    self.sync(file.day, file.state, data, offset=offset, signature=signature)
                    changed.add(file.day)
            if progress is not None:
                progress(done, len(files))
        for source, state in known:
            day = date.fromisoformat(source)
            self.index.drop(group(day, state))
            self._forget(group(day, state))
            changed.add(day)
        return changed

    def stale(self, files: list[DayFile]) -> list[tuple[date, str, str]]:
        """What :meth:`refresh` would change, without changing it: (day, state, why)."""
        known = self.index.signatures(DAILY)
        found = []
        for file in files:
            kept = known.pop((file.day.isoformat(), file.state), None)
            read = self._read_if_changed(file, kept)
            if kept is None:
                found.append((file.day, file.state, "not indexed"))
            elif read is not None and read[2].sha256 != kept.sha256:
                found.append((file.day, file.state, "changed since it was indexed"))
        found += [(date.fromisoformat(s), state, "indexed, but gone") for s, state in known]
        return found

    def _read_if_changed(
        self, file: DayFile, kept: Signature | None
    ) -> tuple[bytes, int, Signature] | None:
        """The file's indexed bytes, their first line's offset and its signature, unless
        its size and mtime are those ``kept`` (or it is gone since it was listed)."""
        try:
            stat = file.stat()
            if kept is not None and (kept.size, kept.mtime_ns) == (stat.st_size, stat.st_mtime_ns):
                return None
            data, offset = file.read()
        except FileNotFoundError:
            return None  # gone since it was listed: dropped at the next look
        self.reads += 1
        return data, offset, signature_of(stat, data)
