"""The compost: what retired agents learned, left behind as JSON files, read-only to the daemon.

Each ``*.json`` file in the compost directory holds one record or a list of records. Every
successful strategy, template improvement and failure pattern of a record is a *learning*.
Learnings are grouped by ``(template_id, learning text)``, so a lesson several agents of a
template arrived at separately shows up once, with the number of agents behind it.

Learnings are ranked from the store's text index (:class:`~daemon.search.index.TextIndex`,
layer ``compost``): each compost file is a group, one row per learning at its position in
the file, kept in step with the file by :class:`~daemon.files.file_rows.FileRows` (its
signature beside it), so only files whose size or mtime changed are read, and rows are
written only where a learning's text did. A search takes the index's candidates, scores
them with BM25 over the layer's statistics (the formula of
:class:`daemon.search.text.Index`; a learning several agents left counts once per agent in
them), and groups them by ``(template_id, learning)``.

A row holds only terms: the learning's text, its template and its agent come from the
file, parsed when it is indexed and kept in memory (a file whose rows were written by
another process is parsed when one of its rows is first a candidate). Storing them would
only copy the files into the database: the hits show the learning's text anyway, which the
rows do not hold. The agents behind a learning are those of its candidate rows, which are
every row of that text (they score alike) unless a query matches more than
``CANDIDATES`` learnings. The ``templates`` filter applies to what is returned; every
learning is indexed, so the index serves any configuration of the same directory.

A malformed file (bad JSON, nesting too deep to parse, a wrong shape) or anything that is
not a regular file (a FIFO, a device) is logged once and skipped (indexed as holding
nothing, so it is not read again until it changes); the others still count. Files are
opened without blocking, so nothing in the directory can hang a recall. An index this
process may not write (the CLI with the daemon down) is ranked from as it is: a row whose
learning is no longer in its file is left out, and that the index is not current is said
once in the log.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from daemon.core.text_rows import COMPOST
from daemon.files.file_rows import FileRows, IndexedFile
from daemon.fs import read_regular
from daemon.search.index import TextIndex, bm25
from daemon.search.memory_index import MemoryTextIndex
from daemon.search.text import B, query_terms, terms

log = structlog.get_logger("cambium.compost")

# How many learnings the index is asked for: every one holding a query term, for a compost
# of thousands of retired agents.
CANDIDATES = 2000

NonEmpty = Annotated[str, Field(min_length=1)]


class _Shape(BaseModel):
    # Strict: a number written as a string, or a string where a list belongs, is a
    # malformed record rather than something to guess at. Unknown keys are ignored.
    model_config = ConfigDict(strict=True, frozen=True)


class FailurePattern(_Shape):
    pattern: str
    frequency: float
    context: Any


class CompostRecord(_Shape):
    id: NonEmpty
    agent_id: NonEmpty
    template_id: NonEmpty
    success_rate: float
    failure_patterns: list[FailurePattern]
    successful_strategies: list[str]
    template_improvements: list[str]
    routing_hints: list[Any]
    composted_at: str
    reason: str

    def learnings(self) -> list[str]:
        texts = [
            *self.successful_strategies,
            *self.template_improvements,
            *(failure.pattern for failure in self.failure_patterns),
        ]
        return [text.strip() for text in texts if text.strip()]


_RECORDS = TypeAdapter(list[CompostRecord])


@dataclass(frozen=True, slots=True)
class CompostHit:
    template_id: str
    learning: str
    source_agent_count: int


@dataclass(frozen=True, slots=True)
class _Learned:
    """A learning as a file holds it: one row of the index, at its position."""

    template_id: str
    agent_id: str
    text: str


# A learning of a template: (template_id, learning text).
_Learning = tuple[str, str]


class Compost:
    """The compost directory, searched for learnings, ranked from ``index`` (by default
    one in memory). ``templates``, when given, is the only template ids whose learnings
    are returned (an empty list returns none)."""

    def __init__(
        self,
        directory: Path,
        templates: Sequence[str] | None = None,
        *,
        index: TextIndex | None = None,
    ) -> None:
        self.directory = directory
        self.templates = None if templates is None else frozenset(templates)
        self.rows = FileRows(MemoryTextIndex() if index is None else index, COMPOST, self._texts)
        self._lock = threading.Lock()
        self._learned: dict[str, list[_Learned]] = {}  # by file, as last read

    def search(self, query: str, limit: int) -> list[CompostHit]:
        """Learnings matching ``query``, most relevant first; on equal relevance, the one
        more agents arrived at comes first."""
        wanted = list(query_terms(query))
        groups: dict[_Learning, tuple[float, set[str]]] = {}
        with self._lock:
            files = self._refresh()
            index = self.rows.index
            found = index.candidates(COMPOST, wanted, CANDIDATES) if wanted and files else []
            scores = bm25(found, wanted, index.statistics(COMPOST, wanted), B) if found else []
            for candidate, score in zip(found, scores, strict=True):
                learned = self._learning(candidate.source, candidate.part, candidate.terms)
                if learned is None or (
                    self.templates is not None and learned.template_id not in self.templates
                ):
                    continue
                key = (learned.template_id, learned.text)
                best, agents = groups.get(key, (score, set()))
                groups[key] = (max(best, score), agents | {learned.agent_id})
        ranked = sorted(groups, key=lambda key: (-groups[key][0], -len(groups[key][1]), key))
        return [
            CompostHit(template_id, learning, len(groups[(template_id, learning)][1]))
            for template_id, learning in ranked[: max(limit, 0)]
        ]

    def refresh(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Bring the index in line with the files (where this process may write it): only
        files whose size or mtime changed are read. ``progress`` is told (files looked at,
        files) after each file."""
        with self._lock:
            self._refresh(progress)

    def _refresh(self, progress: Callable[[int, int], None] | None = None) -> int:
        """How many files there are (none: nothing to search)."""
        files = self._files()
        for gone in self._learned.keys() - {file.source for file in files}:
            del self._learned[gone]
        self.rows.keep_up(lambda: files, progress)
        return len(files)

    def stale(self) -> list[tuple[str, str]]:
        """The files the index is not in step with: (path, why)."""
        with self._lock:
            return [(source, why) for source, _, why in self.rows.stale(self._files())]

    def _files(self) -> list[IndexedFile]:
        paths = sorted(self.directory.glob("*.json"))  # nothing if there is no directory
        return [IndexedFile(str(path), "", path.stat, partial(self._read, path)) for path in paths]

    def _read(self, path: Path) -> tuple[bytes, int]:
        """The file's bytes for the index, its learnings parsed and kept; a file that is
        not a regular file is logged and held as empty."""
        try:
            data = read_regular(path)
        except FileNotFoundError:
            raise
        except OSError as exc:  # a FIFO or a device
            log.warning("compost file skipped", path=str(path), error=str(exc))
            self._learned[str(path)] = []
            return b"", 0
        self._learned[str(path)] = _parse(path, data)
        return data, 0

    def _texts(self, source: str, _: bytes, __: int) -> list[tuple[int, str]]:
        """The file's rows: its learnings, as :meth:`_read` parsed them just before."""
        return list(enumerate(learned.text for learned in self._learned[source]))

    def _learning(self, source: str, part: int, indexed: str) -> _Learned | None:
        """The learning of a candidate row: the file is parsed if no read kept it; None if
        the file no longer holds that learning there (a stale, read-only index)."""
        if source not in self._learned:
            try:
                self._read(Path(source))
            except FileNotFoundError:
                return None
        learned = self._learned[source]
        if part >= len(learned) or " ".join(terms(learned[part].text)) != indexed:
            return None
        return learned[part]


def _parse(path: Path, data: bytes) -> list[_Learned]:
    """The learnings of one file, in order; none, logged, if the file is malformed."""
    try:
        parsed = json.loads(data)
        records = _RECORDS.validate_python(parsed if isinstance(parsed, list) else [parsed])
    # Bad JSON and a wrong shape are ValueErrors; nesting deeper than the parser's
    # recursion limit is a RecursionError.
    except (ValueError, RecursionError) as exc:
        log.warning("compost file skipped", path=str(path), error=str(exc))
        return []
    return [
        _Learned(record.template_id, record.agent_id, text)
        for record in records
        for text in record.learnings()
    ]
