"""The store's text index as the file layers use it: each call one transaction on the
store's own connections (:class:`~daemon.store.text_index.TextRows` holds the queries)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from daemon.core.text_rows import Candidate, Group, Row, Signature, Statistics
from daemon.store.text_index import TextRows

if TYPE_CHECKING:
    from daemon.store.engine import Store, Tx

T = TypeVar("T")


class StoreTextIndex:
    """The store's :class:`~daemon.search.index.TextIndex`: each call one transaction on
    the store's own connections. Writable once the store is started (the daemon, a
    command that writes); a store opened only to read (the CLI) refuses writes."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @property
    def writable(self) -> bool:
        return self._store.writer_alive

    def _read(self, query: Callable[[TextRows], T]) -> T:
        return self._store.read_sync(lambda tx: query(tx.text_index))

    def _write(self, job: Callable[[Tx], None]) -> None:
        if not self.writable:
            raise PermissionError("the text index is only read here: the store is not started")
        self._store.write_sync(job)

    def digests(self, group: Group) -> dict[int, int]:
        return self._read(lambda index: index.digests(group))

    def signatures(self, layer: str) -> dict[tuple[str, str], Signature]:
        return self._read(lambda index: index.signatures(layer))

    def write(
        self,
        group: Group,
        written: Sequence[Row],
        removed: Sequence[int],
        signature: Signature | None,
    ) -> None:
        self._write(lambda tx: tx.text_index.write(group, written, removed, signature))

    def move(self, source: Group, target: Group, shift: int) -> None:
        self._write(lambda tx: tx.text_index.move(source, target, shift))

    def drop(self, group: Group) -> None:
        self._write(lambda tx: tx.text_index.drop(group))

    def candidates(
        self,
        layer: str,
        wanted: Sequence[str],
        limit: int,
        *,
        scope: str | None = None,
        since: str | None = None,
    ) -> list[Candidate]:
        return self._read(
            lambda index: index.candidates(layer, wanted, limit, scope=scope, since=since)
        )

    def statistics(self, layer: str, wanted: Sequence[str]) -> Statistics:
        return self._read(lambda index: index.statistics(layer, wanted))

    def parts(self, layer: str, sources: Sequence[str]) -> list[tuple[str, str, int]]:
        return self._read(lambda index: index.parts(layer, sources))
