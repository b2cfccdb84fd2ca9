"""Tombstones: what each ``memory.forget`` erased (who, when, why, how many), never the
text. :class:`Tombstones` names every operation on them once."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from daemon.core.records import Tombstone
from daemon.store.sql import (
    insert_ignoring_duplicates,
    insert_or_ignore,
    streamed_rows,
    with_instants,
)
from daemon.store.tables import TombstoneTable

tombstones = TombstoneTable.__table__  # type: ignore[attr-defined]


class Tombstones:
    """Every operation on tombstones, inside the transaction of ``connection``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def insert(self, tombstone: Tombstone) -> bool:
        return insert_or_ignore(self.connection, tombstones, tombstone.to_row())

    def listing(self, workspace: str) -> list[Tombstone]:
        """Newest first."""
        rows = self.connection.execute(
            select(tombstones)
            .where(tombstones.c.workspace_id == workspace)
            .order_by(tombstones.c.forgotten_at.desc(), tombstones.c.id)
        )
        return [Tombstone.from_row(row._mapping) for row in rows]

    def all_rows(self) -> Iterator[dict[str, Any]]:
        """Every tombstone as its column mapping, by id (for export)."""
        return streamed_rows(self.connection, select(tombstones).order_by(tombstones.c.id))

    def restore(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert exported tombstones whose ids are not stored yet (import)."""
        if rows:
            dialect = self.connection.dialect.name
            statement = insert_ignoring_duplicates(tombstones, dialect)
            self.connection.execute(statement, with_instants(tombstones, rows))
