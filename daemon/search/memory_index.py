""":class:`MemoryTextIndex`: the :class:`~daemon.search.index.TextIndex` in a process's
memory, for the file layers' tests and tools that have no store. It ranks candidates by
the layer's own BM25 (with the usual ``b``) where the store's engines use theirs."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from daemon.core.text_rows import Candidate, Group, Row, Signature, Statistics
from daemon.search.index import bm25
from daemon.search.text import B


class MemoryTextIndex:
    """Rows by group, in memory. Thread-safe."""

    writable = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[Group, dict[int, Row]] = {}
        self._signatures: dict[Group, Signature] = {}

    def digests(self, group: Group) -> dict[int, int]:
        with self._lock:
            return {part: row.digest for part, row in self._rows.get(group, {}).items()}

    def signatures(self, layer: str) -> dict[tuple[str, str], Signature]:
        with self._lock:
            return {
                (group.source, group.state): signature
                for group, signature in self._signatures.items()
                if group.layer == layer
            }

    def write(
        self,
        group: Group,
        rows: Sequence[Row],
        removed: Sequence[int],
        signature: Signature | None,
    ) -> None:
        with self._lock:
            held = self._rows.setdefault(group, {})
            for part in removed:
                held.pop(part, None)
            held.update((row.part, row) for row in rows)
            if signature is None:
                self._signatures.pop(group, None)
            else:
                self._signatures[group] = signature

    def move(self, source: Group, target: Group, shift: int) -> None:
        with self._lock:
            moved = self._rows.pop(source, {})
            self._signatures.pop(source, None)
            held = self._rows.setdefault(target, {})
            for part, row in moved.items():
                held[part + shift] = Row(
                    part + shift, row.terms, row.length, row.digest, row.speaker
                )

    def drop(self, group: Group) -> None:
        with self._lock:
            self._rows.pop(group, None)
            self._signatures.pop(group, None)

    def candidates(
        self,
        layer: str,
        wanted: Sequence[str],
        limit: int,
        *,
        scope: str | None = None,
        since: str | None = None,
    ) -> list[Candidate]:
        terms = set(wanted)
        with self._lock:
            found = [
                Candidate(group.source, group.state, part, row.terms, row.length, row.speaker)
                for group, rows in self._rows.items()
                if group.layer == layer
                and (scope is None or group.scope == scope)
                and (since is None or group.source >= since)
                for part, row in rows.items()
                if terms.intersection(row.terms.split())
            ]
        scores = bm25(found, list(terms), self.statistics(layer, list(terms)), B)
        ranked = sorted(zip(scores, found, strict=True), key=lambda pair: -pair[0])
        return [candidate for _, candidate in ranked[:limit]]

    def statistics(self, layer: str, wanted: Sequence[str]) -> Statistics:
        with self._lock:
            rows = [
                row
                for group, held in self._rows.items()
                if group.layer == layer
                for row in held.values()
                if row.length
            ]
        return Statistics(
            len(rows),
            sum(row.length for row in rows),
            {term: sum(term in row.terms.split() for row in rows) for term in wanted},
        )

    def parts(self, layer: str, sources: Sequence[str]) -> list[tuple[str, str, int]]:
        wanted = set(sources)
        with self._lock:
            return [
                (group.source, group.state, part)
                for group, rows in self._rows.items()
                if group.layer == layer and group.source in wanted
                for part in rows
            ]
