"""The substrate: the user's own long-term markdown files, read and searched, never written.

The configured entries are absolute paths, each a directory (its ``*.md`` children) or a
single file. They are resolved once and the listing is served from a cache, as are the
texts read; the watcher calls :meth:`Substrate.invalidate` when a file is created, edited,
renamed or deleted, and the next call resolves the entries again and reads again what was
named.

Files are ranked from the store's text index (:class:`~daemon.search.index.TextIndex`,
layer ``substrate``): each file is one row, its whole text, kept in step with the file by
:class:`~daemon.files.file_rows.FileRows` (its signature beside it). Before the first
search after a listing, every file's size and mtime is looked at and only those that
changed (and those the watcher named) are read, their row written only when the text's
hash differs, so a start with a current index reads no file; listing and reading files
never touch the index. The index's candidates are scored with BM25 over the layer's
statistics, the formula of :class:`daemon.search.text.Index`; each hit is shown by its
best line, found by scoring the lines of the hits' files alone (those few files are read,
or served from the cache of texts read). The dense side is as it was: every file's lines
are fed to the layer's :class:`~daemon.search.fusion.DenseDocuments`, so with it every
file is read before the first search. An index this process may not write (the CLI with
the daemon down) is ranked from as it is, and said once in the log when it is not current.

Files are only ever opened for reading, without blocking: the daemon never writes, moves
or deletes a substrate file, and a FIFO or device named like one is skipped with a warning.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import structlog

from daemon.core.text_rows import SUBSTRATE
from daemon.files.file_rows import FileRows, IndexedFile
from daemon.fs import read_regular
from daemon.search.fusion import (
    DENSE_CANDIDATES,
    DENSE_WEIGHT,
    FUSION_K,
    DenseDocuments,
    ranking,
    reciprocal_rank_fusion,
)
from daemon.search.index import TextIndex, bm25
from daemon.search.memory_index import MemoryTextIndex
from daemon.search.text import B, Index, query_terms, terms

log = structlog.get_logger("cambium.substrate")

MARKDOWN = ".md"
EXCERPT_LINES = 3  # for a referenced file: its opening lines
# How many files the index is asked for: every file holding a query term, for any
# substrate a person keeps by hand.
CANDIDATES = 1000


@dataclass(frozen=True, slots=True)
class SubstrateHit:
    file: str  # absolute path
    excerpt: str
    reason: str


# A line of a substrate file: the file and the line's 0-based position in it.
_LineKey = tuple[Path, int]


def _whole_text(_: str, data: bytes, __: int) -> list[tuple[int, str]]:
    """A substrate file's one text: all of it."""
    return [(0, _decoded(data))]


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class Substrate:
    """Read-only access to the substrate files, safe to use from several threads; ranked
    from ``index`` (by default one in memory)."""

    def __init__(
        self,
        entries: Sequence[Path],
        dense: DenseDocuments[_LineKey] | None = None,
        *,
        index: TextIndex | None = None,
    ) -> None:
        relative = [str(entry) for entry in entries if not entry.is_absolute()]
        if relative:
            raise ValueError(f"substrate entries must be absolute paths: {', '.join(relative)}")
        self.entries = list(entries)
        self.rows = FileRows(MemoryTextIndex() if index is None else index, SUBSTRATE, _whole_text)
        self._dense = dense
        self._lock = threading.Lock()
        self._files: list[Path] | None = None  # None: resolve the entries again
        self._texts: dict[Path, str] = {}  # the files read, until invalidated
        # The lines and terms of the files read, to show a hit by its best line without
        # stemming the file again at every search.
        self._lines: Index[_LineKey] = Index()
        self._terms: dict[Path, frozenset[str]] = {}
        self._refused: set[Path] = set()  # unreadable when read, until invalidated
        self._in_step = False  # the index and the dense side hold the listing

    # -- for the watcher -----------------------------------------------------------------

    def watch_roots(self) -> list[Path]:
        """What to watch: the entries that exist, directories and files alike. Not a file
        entry's directory, nor a missing entry's (the watcher looks for those again every
        few seconds): it may hold the store's database, and a directory's watch wakes at
        every write to any file in it."""
        return [entry for entry in dict.fromkeys(self.entries) if entry.exists()]

    def is_substrate_path(self, path: Path) -> bool:
        """Whether a change at ``path`` changes the substrate: ``path`` is an entry itself,
        or a ``*.md`` directly inside a directory entry (or inside an entry that is missing,
        which may be a directory just deleted)."""
        return any(
            path == entry or (path.parent == entry and _is_markdown(path) and not entry.is_file())
            for entry in self.entries
        )

    def invalidate(self, path: Path | None = None) -> None:
        """Forget ``path`` (or every file): the next read re-resolves the entries and
        reads again whatever was forgotten; a path named is re-read and re-synced even if
        its size and mtime look unchanged (its hash decides whether its row is written)."""
        with self._lock:
            self._files = None
            for cached in list(self._texts) if path is None else [path]:
                self._forget(cached)
            if path is None:
                self._refused.clear()
            else:
                self._refused.discard(path)
                self.rows.recheck(str(path))

    # -- reading -------------------------------------------------------------------------

    def files(self) -> list[Path]:
        """The substrate files, as absolute paths, in entry order."""
        with self._lock:
            return list(self._load())

    def listed(self) -> list[Path] | None:
        """The files as last listed, touching no file and taking no lock (health asks on
        every call); None when a change since asks for a new listing (:meth:`files`)."""
        files = self._files  # replaced whole, never changed in place: safe to read unlocked
        return None if files is None else list(files)

    def read(self, path: Path) -> str:
        """The contents of one substrate file; any other path is refused."""
        with self._lock:
            text = self._text(path) if path in self._load() else None
            if text is None:
                raise ValueError(f"not a substrate file: {path}")
            return text

    def contents(self) -> dict[Path, str]:
        """Every substrate file with its contents."""
        with self._lock:
            texts = {path: self._text(path) for path in self._load()}
            return {path: text for path, text in texts.items() if text is not None}

    def search(self, query: str, limit: int) -> list[SubstrateHit]:
        """The files most relevant to ``query``, best first, each shown by its best matching
        line with a line of context either side."""
        with self._lock:
            files = self._ranked()
            position = {path: index for index, path in enumerate(files)}
            lexical = self._scores(query, position)
            similar: dict[_LineKey, float] = {}
            if self._dense is None:
                ranked = ranking(lexical, position.__getitem__)[:limit]
            else:
                similar = self._dense.nearest(query, DENSE_CANDIDATES)
                ranked = _fused(lexical, similar, position, limit)
            texts = {path: text for path in ranked if (text := self._text(path)) is not None}
            # Each file is shown by its best matching line; a file found by meaning alone,
            # by its most similar line (its lines as _read numbered them).
            shown = [
                (path, n) for path, text in texts.items() for n in range(len(text.splitlines()))
            ]
            best = _best_lines(self._lines.scores(query, among=shown))
            held = {path: self._terms[path] for path in texts}
        for path, number in _best_lines(similar).items():
            best.setdefault(path, number)
        asked = query_terms(query)
        hits = []
        for path, text in texts.items():
            number = best.get(path, 0)  # 0: the index is older than the file (read only)
            excerpt = "\n".join(text.splitlines()[max(number - 1, 0) : number + 2]).strip()
            words = [word for term, word in asked.items() if term in held[path]]
            reason = f"matched tokens: {', '.join(words)}" if words else "similar in meaning"
            hits.append(SubstrateHit(str(path), excerpt, reason))
        return hits

    def _scores(self, query: str, position: dict[Path, int]) -> dict[Path, float]:
        """The BM25 score of every listed file the index finds for ``query``."""
        wanted = list(query_terms(query))
        index = self.rows.index
        listed = {str(path): path for path in position}
        found = [
            candidate
            for candidate in (index.candidates(SUBSTRATE, wanted, CANDIDATES) if wanted else [])
            if candidate.source in listed  # not a file gone since (read only)
        ]
        if not found:
            return {}
        scores = bm25(found, wanted, index.statistics(SUBSTRATE, wanted), B)
        return {listed[c.source]: score for c, score in zip(found, scores, strict=True)}

    def prepare_search(self) -> None:
        """Sync what changed now (with a dense side, its lines then wait for the daemon's
        embedding worker), so that the next search does not read it."""
        with self._lock:
            self._ranked()

    def refresh(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Resolve the entries again and bring the index in line with the files (where this
        process may write it): only files whose size or mtime changed are read.
        ``progress`` is told (files looked at, files) after each file."""
        with self._lock:
            self._files = None
            self._ranked(progress)

    def stale(self) -> list[tuple[str, str]]:
        """The files the index is not in step with: (path, why)."""
        with self._lock:
            files = self._indexed_files(self._resolve())
            return [(source, why) for source, _, why in self.rows.stale(files)]

    def referenced(self, refs: Iterable[str], mark_id: str) -> list[SubstrateHit]:
        """The files a mark names in its ``substrate_refs``: a ref matches a file whose path
        ends with ``/`` + ref, so ``lessons.md`` names ``…/lessons.md``, not ``…/mylessons.md``."""
        with self._lock:
            files = self._load()
            hits: list[SubstrateHit] = []
            named: set[Path] = set()
            for ref in refs:
                for path in files:
                    if path not in named and str(path).endswith("/" + ref):
                        named.add(path)
                        text = self._text(path)
                        if text is None:
                            continue
                        excerpt = "\n".join(text.splitlines()[:EXCERPT_LINES]).strip()
                        reason = f"referenced by mark {mark_id}"
                        hits.append(SubstrateHit(str(path), excerpt, reason))
            return hits

    # -- the cache and the index (callers hold the lock) ---------------------------------

    def _load(self) -> list[Path]:
        """The listing, resolved again after an invalidation (no file is read)."""
        if self._files is None:
            resolved = self._resolve()
            for gone in self._texts.keys() - set(resolved):
                self._forget(gone)
            self._files = [path for path in resolved if path not in self._refused]
            self._in_step = False
        return self._files

    def _ranked(self, progress: Callable[[int, int], None] | None = None) -> list[Path]:
        """The listing, with the index (where this process may write it) and the dense side
        in step with it: only what ranks needs it, so listing and reading files (health,
        Loom, ``cambium memory substrate``) never index."""
        files = self._load()
        if self._in_step:
            return files
        self.rows.keep_up(partial(self._indexed_files, files), progress)
        if self._dense is not None:  # the dense side holds every file's lines
            for path in files:
                self._text(path)
        self._in_step = True
        return self._load()  # without the files found unreadable meanwhile

    def _indexed_files(self, paths: list[Path]) -> list[IndexedFile]:
        return [
            IndexedFile(str(path), "", path.stat, partial(self._indexed, path)) for path in paths
        ]

    def _indexed(self, path: Path) -> tuple[bytes, int]:
        """The file's bytes, for the index (and its text kept); gone if unreadable."""
        data = self._read(path)
        if data is None:
            raise FileNotFoundError(str(path))
        return data, 0

    def _text(self, path: Path) -> str | None:
        """The file's text, read now unless it is cached; None if it cannot be read."""
        if path in self._texts:
            return self._texts[path]
        return None if self._read(path) is None else self._texts[path]

    def _read(self, path: Path) -> bytes | None:
        """Read the file and keep its text (feeding its lines to the dense side); None,
        logged and left out of the listing, if it cannot be read."""
        self._forget(path)
        try:
            data = read_regular(path)
        except OSError as exc:
            log.warning("substrate file unreadable; skipped", path=str(path), error=str(exc))
            self._refused.add(path)
            if self._files is not None:
                self._files = [listed for listed in self._files if listed != path]
            return None
        text = _decoded(data)
        self._texts[path] = text
        self._terms[path] = frozenset(terms(text))
        for number, line in enumerate(text.splitlines()):
            self._lines.add((path, number), line)
            if self._dense is not None:
                self._dense.add((path, number), (line,))
        return data

    def _resolve(self) -> list[Path]:
        files: list[Path] = []
        for entry in self.entries:
            if entry.is_dir():
                try:
                    children = [p for p in entry.iterdir() if _is_markdown(p) and p.is_file()]
                except OSError as exc:  # deleted or unreadable since the check
                    log.warning("substrate entry unreadable", entry=str(entry), error=str(exc))
                    continue
                files.extend(sorted(children))
            elif entry.is_file():
                files.append(entry)
            elif entry.exists():
                log.warning("substrate entry is not a regular file; skipped", entry=str(entry))
            else:
                log.warning("substrate entry missing; skipped", entry=str(entry))
        # An entry listed twice, or a file also inside a listed directory, counts once.
        return list(dict.fromkeys(files))

    def _forget(self, path: Path) -> None:
        text = self._texts.pop(path, None)
        self._terms.pop(path, None)
        for number in range(len(text.splitlines()) if text is not None else 0):
            self._lines.remove((path, number))
            if self._dense is not None:
                self._dense.remove((path, number))


def _fused(
    lexical: dict[Path, float],
    similar: dict[_LineKey, float],
    position: dict[Path, int],
    limit: int,
) -> list[Path]:
    """Files ranked by fusing the lexical file ranking with a ranking of files by their
    most similar line."""
    by_meaning: dict[Path, float] = {}
    for (path, _), similarity in similar.items():
        by_meaning[path] = max(by_meaning.get(path, -1.0), similarity)
    fused = reciprocal_rank_fusion(
        [ranking(lexical, position.__getitem__), ranking(by_meaning, position.__getitem__)],
        weights=(1.0, DENSE_WEIGHT),
        k=FUSION_K,
    )
    return ranking(fused, position.__getitem__)[:limit]


def _best_lines(scores: dict[_LineKey, float]) -> dict[Path, int]:
    """Each file's best scoring line; between equal scores, the earlier line."""
    best: dict[Path, tuple[float, int]] = {}
    for (path, number), score in scores.items():
        best[path] = max(best.get(path, (score, -number)), (score, -number))
    return {path: -negative for path, (_, negative) in best.items()}


def _is_markdown(path: Path) -> bool:
    return path.name.endswith(MARKDOWN)
