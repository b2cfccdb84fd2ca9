"""The substrate: the user's own long-term markdown files, read and searched, never written.

The configured entries are absolute paths, each a directory (its ``*.md`` children) or a
single file. They are resolved and read once per load and then served from a cache; the
watcher calls :meth:`Substrate.invalidate` when a file is created, edited, renamed or
deleted, and the next call resolves the entries again and re-reads what was dropped.

Files are only ever opened for reading, without blocking: the daemon never writes, moves
or deletes a substrate file, and a FIFO or device named like one is skipped with a warning.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from daemon.fs import read_regular
from daemon.search.fusion import (
    DENSE_CANDIDATES,
    DENSE_WEIGHT,
    FUSION_K,
    DenseDocuments,
    HybridIndex,
    ranking,
    reciprocal_rank_fusion,
)
from daemon.search.text import Index

log = structlog.get_logger("cambium.substrate")

MARKDOWN = ".md"
EXCERPT_LINES = 3  # for a referenced file: its opening lines


@dataclass(frozen=True, slots=True)
class SubstrateHit:
    file: str  # absolute path
    excerpt: str
    reason: str


# A line of a substrate file: the file and the line's 0-based position in it.
_LineKey = tuple[Path, int]


class Substrate:
    """Read-only access to the substrate files, safe to use from several threads."""

    def __init__(
        self, entries: Sequence[Path], dense: DenseDocuments[_LineKey] | None = None
    ) -> None:
        relative = [str(entry) for entry in entries if not entry.is_absolute()]
        if relative:
            raise ValueError(f"substrate entries must be absolute paths: {', '.join(relative)}")
        self.entries = list(entries)
        self._lock = threading.Lock()
        self._files: list[Path] | None = None  # None: resolve the entries again
        self._texts: dict[Path, str] = {}
        # Files are ranked as whole documents; within a file, its best line is the excerpt.
        self._files_index: Index[Path] = Index()
        self._lines_index: HybridIndex[_LineKey] = HybridIndex(dense)

    # -- for the watcher -----------------------------------------------------------------

    def watch_roots(self) -> list[Path]:
        """Directories to watch: directory entries themselves, and the parent of any other
        entry, so that a file saved by renaming a temporary over it is still seen."""
        roots: list[Path] = []
        for entry in self.entries:
            root = entry if entry.is_dir() else entry.parent
            if root not in roots:
                roots.append(root)
        return roots

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
        reads again whatever was forgotten."""
        with self._lock:
            self._files = None
            for cached in list(self._texts) if path is None else [path]:
                self._forget(cached)

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
            if path not in self._load():
                raise ValueError(f"not a substrate file: {path}")
            return self._texts[path]

    def contents(self) -> dict[Path, str]:
        """Every substrate file with its contents."""
        with self._lock:
            return {path: self._texts[path] for path in self._load()}

    def search(self, query: str, limit: int) -> list[SubstrateHit]:
        """The files most relevant to ``query``, best first, each shown by its best matching
        line with a line of context either side."""
        with self._lock:
            files = self._load()
            dense = self._lines_index.dense
            similar: dict[_LineKey, float] = {}
            if dense is None:
                ranked = [match.key for match in self._files_index.search(query, limit)]
            else:
                similar = dense.nearest(query, DENSE_CANDIDATES)
                ranked = self._fused(query, limit, similar, files)
            wanted = set(ranked)
            # Each file is shown by its best matching line; a file found by meaning alone,
            # by its most similar line.
            best = _best_lines(self._lines_index.scores(query, where=lambda key: key[0] in wanted))
            for path, line in _best_lines(similar).items():
                best.setdefault(path, line)
            hits = []
            for path in ranked:
                text = self._texts[path].splitlines()
                number = best[path]
                excerpt = "\n".join(text[max(number - 1, 0) : number + 2]).strip()
                words = self._files_index.words(path, query)
                reason = f"matched tokens: {', '.join(words)}" if words else "similar in meaning"
                hits.append(SubstrateHit(str(path), excerpt, reason))
            return hits

    def _fused(
        self, query: str, limit: int, similar: dict[_LineKey, float], files: list[Path]
    ) -> list[Path]:
        """Files ranked by fusing the lexical file ranking with a ranking of files by their
        most similar line."""
        by_meaning: dict[Path, float] = {}
        for (path, _), similarity in similar.items():
            by_meaning[path] = max(by_meaning.get(path, -1.0), similarity)
        position = {path: index for index, path in enumerate(files)}
        fused = reciprocal_rank_fusion(
            [
                ranking(self._files_index.scores(query), position.__getitem__),
                ranking(by_meaning, position.__getitem__),
            ],
            weights=(1.0, DENSE_WEIGHT),
            k=FUSION_K,
        )
        return ranking(fused, position.__getitem__)[:limit]

    def prepare_search(self) -> None:
        """Read what changed now (with a dense side, its lines then wait for the daemon's
        embedding worker), so that the next search does not read it."""
        with self._lock:
            self._load()

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
                        lines = self._texts[path].splitlines()
                        excerpt = "\n".join(lines[:EXCERPT_LINES]).strip()
                        reason = f"referenced by mark {mark_id}"
                        hits.append(SubstrateHit(str(path), excerpt, reason))
            return hits

    # -- the cache (callers hold the lock) -----------------------------------------------

    def _load(self) -> list[Path]:
        if self._files is not None:
            return self._files
        resolved = self._resolve()
        for gone in self._texts.keys() - set(resolved):
            self._forget(gone)
        loaded = []
        for path in resolved:
            if path not in self._texts:
                try:
                    text = read_regular(path).decode("utf-8", errors="replace")
                except OSError as exc:
                    log.warning(
                        "substrate file unreadable; skipped", path=str(path), error=str(exc)
                    )
                    continue
                self._texts[path] = text
                self._files_index.add(path, text)
                for number, line in enumerate(text.splitlines()):
                    self._lines_index.add((path, number), line)
            loaded.append(path)
        self._files = loaded
        return loaded

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
        self._files_index.remove(path)
        for number in range(len(text.splitlines()) if text is not None else 0):
            self._lines_index.remove((path, number))


def _best_lines(scores: dict[_LineKey, float]) -> dict[Path, int]:
    """Each file's best scoring line; between equal scores, the earlier line."""
    best: dict[Path, tuple[float, int]] = {}
    for (path, number), score in scores.items():
        best[path] = max(best.get(path, (score, -number)), (score, -number))
    return {path: -negative for path, (_, negative) in best.items()}


def _is_markdown(path: Path) -> bool:
    return path.name.endswith(MARKDOWN)
