"""Receptor cursors (``receptor_cursors``): one row per receptor, saying where it is in the
log. Every signal it binds up to ``position`` is settled; what was stored before it first ran
(``seq <= since``) is not its to deliver. The hot operations (moving a cursor, asking whether
a receptor has a backlog) go through the driver (:mod:`daemon.store.fast_path`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, bindparam, select, update
from sqlalchemy.engine import Connection

from daemon.store.fast_path import Raw, advance_cursor, backlog_free_position, pass_over
from daemon.store.signal_rows import last_seq
from daemon.store.sql import insert_ignoring_duplicates
from daemon.store.tables import ReceptorCursorTable

cursors = ReceptorCursorTable.__table__  # type: ignore[attr-defined]

# Built once: every worker's read starts with it, and building a statement costs more than
# running it.
_CURSOR = select(cursors).where(cursors.c.receptor == bindparam("receptor"))


@dataclass(frozen=True)
class Cursor:
    """Where a receptor is in the log."""

    receptor: str
    binds: frozenset[str]
    since: int
    position: int

    def owns(self, seq: int, signal_type: str) -> bool:
        return seq > self.since and signal_type in self.binds


class ReceptorCursors:
    """Every operation on the receptors' cursors, inside the transaction of ``connection``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def register(self, receptor: str, binds: Iterable[str], now: datetime) -> Cursor:
        """Make sure ``receptor`` has a cursor and binds ``binds``. A new receptor starts at
        the head: what was stored before it existed is not its to deliver."""
        at = last_seq(self.connection)
        self.connection.execute(
            insert_ignoring_duplicates(cursors, self.connection.dialect.name),
            {
                "receptor": receptor,
                "binds": sorted(binds),
                "since": at,
                "position": at,
                "updated_at": now,
            },
        )
        self.connection.execute(
            update(cursors).where(cursors.c.receptor == receptor).values(binds=sorted(binds))
        )
        found = self.cursor(receptor)
        assert found is not None
        return found

    def cursor(self, receptor: str) -> Cursor | None:
        row = self.connection.execute(_CURSOR, {"receptor": receptor}).first()
        return None if row is None else _cursor(row)

    def cursors(self) -> list[Cursor]:
        rows = self.connection.execute(select(cursors).order_by(cursors.c.receptor))
        return [_cursor(row) for row in rows]

    def advance(self, receptor: str, position: int, to: int, now: datetime) -> bool:
        """Move the cursor from ``position`` to ``to``; False if it was not at ``position``
        (another worker or daemon moved it: the caller's work must not count)."""
        return advance_cursor(self.connection, receptor, position, to, now)

    @property
    def single_writer(self) -> bool:
        """Whether this store has one writer (SQLite: one daemon, one writer connection)."""
        return self.connection.dialect.name == "sqlite"

    def pass_over(self, receptors: Sequence[str], before: int, to: int, now: datetime) -> None:
        """Move each of ``receptors`` whose cursor is at ``before`` to ``to`` (what lies
        between is none of theirs: the caller knows the types it appended)."""
        pass_over(self.connection, receptors, before, to, now)

    def backlog_free_position(self, receptor: str, binds: Iterable[str], below: int) -> int | None:
        """The receptor's cursor if none of its signals (of ``binds``) lies between it and
        ``below``; None if some do, or it has no cursor."""
        return backlog_free_position(self.connection, receptor, sorted(binds), below)

    def savepoint(self) -> AbstractContextManager[None]:
        """Writes inside are undone if it raises (the exception goes on)."""
        return Raw(self.connection).savepoint("inline")


def _cursor(row: Row[Any]) -> Cursor:
    return Cursor(
        receptor=row.receptor,
        binds=frozenset(row.binds),
        since=row.since,
        position=row.position,
    )
