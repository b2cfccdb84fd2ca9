"""The compost: what retired agents learned, left behind as JSON files, read-only to the daemon.

Each ``*.json`` file in the compost directory holds one record or a list of records. Every
successful strategy, template improvement and failure pattern of a record is a *learning*.
Learnings are grouped by ``(template_id, learning text)``, so a lesson several agents of a
template arrived at separately shows up once, with the number of agents behind it.

A malformed file (bad JSON, nesting too deep to parse, a wrong shape) or anything that is
not a regular file (a FIFO, a device) is logged once and skipped; the others still count.
Files are opened without blocking, so nothing in the directory can hang a recall. Parsed
files are cached until their modification time or size changes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from daemon.fs import read_regular
from daemon.search.text import Index

log = structlog.get_logger("cambium.compost")

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


# A learning of a template: (template_id, learning text).
_Learning = tuple[str, str]


class Compost:
    """The compost directory, searched for learnings. ``templates``, when given, is the
    only template ids whose records are read (an empty list reads none)."""

    def __init__(self, directory: Path, templates: Sequence[str] | None = None) -> None:
        self.directory = directory
        self.templates = None if templates is None else frozenset(templates)
        self._lock = threading.Lock()
        self._files: dict[Path, tuple[tuple[int, int], list[CompostRecord]]] = {}
        self._agents: dict[_Learning, set[str]] = {}
        self._index: Index[_Learning] = Index()

    def search(self, query: str, limit: int) -> list[CompostHit]:
        """Learnings matching ``query``, most relevant first; on equal relevance, the one
        more agents arrived at comes first."""
        with self._lock:
            self._refresh()
            agents = self._agents
            scores = self._index.scores(query)
        ranked = sorted(scores, key=lambda key: (-scores[key], -len(agents[key]), key))
        return [
            CompostHit(template_id, learning, len(agents[(template_id, learning)]))
            for template_id, learning in ranked[: max(limit, 0)]
        ]

    def _refresh(self) -> None:
        """Re-read changed files; rebuild the learnings if anything changed."""
        files: dict[Path, tuple[tuple[int, int], list[CompostRecord]]] = {}
        changed = False
        for path in sorted(self.directory.glob("*.json")):  # nothing if there is no directory
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue  # deleted since it was listed
            signature = (stat.st_mtime_ns, stat.st_size)
            cached = self._files.get(path)
            if cached is None or cached[0] != signature:
                cached = (signature, _read(path))
                changed = True
            files[path] = cached
        if not changed and files.keys() == self._files.keys():
            return
        self._files = files
        agents: dict[_Learning, set[str]] = {}
        for _, records in files.values():
            for record in records:
                if self.templates is not None and record.template_id not in self.templates:
                    continue
                for learning in record.learnings():
                    agents.setdefault((record.template_id, learning), set()).add(record.agent_id)
        # A group can draw on several files, so groups and index are rebuilt whole (the
        # compost is small) rather than patched per file.
        self._index = Index()
        for key in agents:
            self._index.add(key, key[1])
        self._agents = agents


def _read(path: Path) -> list[CompostRecord]:
    """The records of one file; none, logged, if the file is malformed or not a regular file."""
    try:
        data = json.loads(read_regular(path))
        return _RECORDS.validate_python(data if isinstance(data, list) else [data])
    # Bad JSON and a wrong shape are ValueErrors; nesting deeper than the parser's
    # recursion limit is a RecursionError.
    except (OSError, ValueError, RecursionError) as exc:
        log.warning("compost file skipped", path=str(path), error=str(exc))
        return []
