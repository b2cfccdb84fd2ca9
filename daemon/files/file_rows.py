"""A layer's files in the text index, each a group of rows kept with the file's signature.

A group is brought in step with its file (:meth:`FileRows.sync`) by comparing each text's
digest with its row's: only what differs is stemmed and written, and the file's signature
(size, mtime, SHA-256) is kept with the rows. :meth:`FileRows.refresh` looks at every file
and syncs only those whose size or mtime changed and whose hash then differs, so a start
with an up-to-date index reads no unchanged file; a file a watcher saw change
(:meth:`FileRows.recheck`) is read whatever its stat says. The daily files
(:mod:`daemon.files.daily_rows`), the substrate's and the compost's use it, each with its
own way of cutting a file into texts.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import structlog

from daemon.core.text_rows import Group, Row, Signature
from daemon.search.index import TextIndex, digest_of, row_of

# A file's texts, each at its part: (source, the file's indexed bytes, the part before the
# first) -> [(part, text)].
Texts = Callable[[str, bytes, int], list[tuple[int, str]]]

log = structlog.get_logger("cambium.index")


@dataclass(frozen=True, slots=True)
class IndexedFile:
    """One file as :meth:`FileRows.refresh` sees it: which group it is (source and state),
    how to stat it and how to read its indexed bytes (and the part before its first)."""

    source: str
    state: str
    stat: Callable[[], os.stat_result]
    read: Callable[[], tuple[bytes, int]]


def signature_of(stat: os.stat_result, data: bytes) -> Signature:
    return Signature(stat.st_size, stat.st_mtime_ns, hashlib.sha256(data).hexdigest())


class FileRows:
    """The groups of one layer's files in ``index``. The caller serialises calls per file."""

    def __init__(self, index: TextIndex, layer: str, texts: Texts) -> None:
        self.index = index
        self.layer = layer
        self._texts = texts
        self.reads = 0  # files read to sync them (what a start with a current index avoids)
        # The signatures as this process last wrote or read them: one query per process, not
        # per search. Another process writing the index (a rebuild) can only make one stale,
        # which costs a read of the file and no write (its digests agree).
        self._known: dict[tuple[str, str], Signature] | None = None
        self._recheck: set[tuple[str, str]] = set()  # files to read whatever their stat says
        self._looked = False  # a read-only index was checked (and said stale) once

    def group(self, source: str, state: str) -> Group:
        return Group(self.layer, source, state)

    def _signatures(self) -> dict[tuple[str, str], Signature]:
        if self._known is None:
            self._known = self.index.signatures(self.layer)
        return self._known

    def _write(
        self, where: Group, rows: list[Row], removed: list[int], signature: Signature | None
    ) -> None:
        self.index.write(where, rows, removed, signature)
        if signature is None:
            self.forget(where.source, where.state)
        else:
            self._signatures()[(where.source, where.state)] = signature

    def forget(self, source: str, state: str) -> None:
        """The group keeps no signature any more (its rows were moved or dropped)."""
        self._signatures().pop((source, state), None)

    def recheck(self, source: str, state: str = "") -> None:
        """The next :meth:`refresh` reads the file even if its size and mtime look
        unchanged (a watcher saw it change); its hash still decides what is written."""
        self._recheck.add((source, state))

    def drop(self, source: str, state: str) -> None:
        """The file is gone: so are its group's rows and signature."""
        self.index.drop(self.group(source, state))
        self.forget(source, state)

    def sync(
        self,
        source: str,
        state: str,
        data: bytes | None,
        *,
        offset: int,
        signature: Signature | None,
    ) -> None:
        """Make the group of the file hold ``data``'s texts (numbered after ``offset``);
        ``None``: the file is gone."""
        if data is None:
            self.drop(source, state)
            return
        where = self.group(source, state)
        held = self.index.digests(where)
        texts = self._texts(source, data, offset)
        rows = [row_of(part, text) for part, text in texts if held.get(part) != digest_of(text)]
        kept = {part for part, _ in texts}
        removed = [part for part in held if part not in kept]
        self._write(where, rows, removed, signature)

    def refresh(
        self,
        files: Callable[[], list[IndexedFile]],
        progress: Callable[[int, int], None] | None = None,
        hold: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> bool:
        """Sync every file ``files()`` lists that changed and drop the groups of files gone;
        whether any group's texts changed. ``progress`` is told (files looked at, files)
        after each. The files are listed, each is synced, and those gone are listed again
        and dropped, each step under ``hold()`` (the daily log's lock, taken in turn): its
        writers wait for one file, never for a pass over years of them, and what they did
        between two steps (an append, a claim) is seen as they left it."""
        with hold():
            listed = files()
        changed = False
        for done, file in enumerate(listed, start=1):
            with hold():
                changed = self._refresh_file(file) or changed
            if progress is not None:
                progress(done, len(listed))
        with hold():
            present = {(file.source, file.state) for file in files()}
            for source, state in [key for key in self._signatures() if key not in present]:
                self.drop(source, state)
                changed = True
        return changed

    def _refresh_file(self, file: IndexedFile) -> bool:
        key = (file.source, file.state)
        kept = self._signatures().get(key)  # (as a writer may have left it since the listing)
        recheck = key in self._recheck
        self._recheck.discard(key)
        read = self._read_if_changed(file, None if recheck else kept)
        if read is None:
            return False
        data, offset, signature = read
        if kept is not None and kept.sha256 == signature.sha256:
            self._write(self.group(*key), [], [], signature)
            return False
        self.sync(file.source, file.state, data, offset=offset, signature=signature)
        return True

    def to_read(self, files: list[IndexedFile]) -> int:
        """How many of ``files`` a refresh would read: those not indexed, or whose size or
        mtime moved, or named for a recheck (a stat each, nothing read). 0 where this process
        may not write the index: a refresh reads nothing then (it says once that the index
        is not current)."""
        if not self.index.writable:
            return 0
        known, count = self._signatures(), 0
        for file in files:
            key = (file.source, file.state)
            try:
                stat = file.stat()
            except FileNotFoundError:
                continue
            count += _moved(known.get(key), stat) or key in self._recheck
        return count

    def keep_up(
        self,
        files: Callable[[], list[IndexedFile]],
        progress: Callable[[int, int], None] | None = None,
        hold: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> bool:
        """:meth:`refresh` where this process may write the index; whether any changed.

        An index this process may not write (a store opened only to read: the CLI, with the
        daemon down) is used as it is: no process but the daemon builds an index (a year of
        notes would take minutes and a gigabyte). If it is not current, that is said once in
        the log: what changed since it was written is searched as it was then."""
        if self.index.writable:
            return self.refresh(files, progress, hold)
        if not self._looked:
            self._looked = True
            stale = self.stale(files())
            if stale:
                log.warning(
                    "the text index is not current: files changed since are searched as they"
                    " were indexed (start the daemon, or run `cambium index rebuild`)",
                    layer=self.layer,
                    files=len(stale),
                )
        return False

    def stale(self, files: list[IndexedFile]) -> list[tuple[str, str, str]]:
        """What :meth:`refresh` would change, without changing it: (source, state, why)."""
        known = self.index.signatures(self.layer)
        found = []
        for file in files:
            kept = known.pop((file.source, file.state), None)
            read = self._read_if_changed(file, kept)
            if kept is None:
                found.append((file.source, file.state, "not indexed"))
            elif read is not None and read[2].sha256 != kept.sha256:
                found.append((file.source, file.state, "changed since it was indexed"))
        found += [(source, state, "indexed, but gone") for source, state in known]
        return found

    def _read_if_changed(
        self, file: IndexedFile, kept: Signature | None
    ) -> tuple[bytes, int, Signature] | None:
        """The file's indexed bytes, their first part's offset and its signature, unless
        its size and mtime are those ``kept`` (or it is gone since it was listed)."""
        try:
            stat = file.stat()
            if not _moved(kept, stat):
                return None
            data, offset = file.read()
        except FileNotFoundError:
            return None  # gone since it was listed: dropped at the next look
        self.reads += 1
        return data, offset, signature_of(stat, data)


def _moved(kept: Signature | None, stat: os.stat_result) -> bool:
    """Whether a file may differ from what was indexed of it (its size or mtime says so)."""
    return kept is None or (kept.size, kept.mtime_ns) != (stat.st_size, stat.st_mtime_ns)
