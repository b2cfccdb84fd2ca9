"""What happened to a workspace's memory in a window of time: the marks made, reinforced,
withered and forgotten, the seeds planted and reviewed. :class:`Activity` names each of
those reads once (for Loom's "this week" page); every window is ``[start, end)``.

Each read returns the ``limit`` newest and how many there are in all, so a busy week costs
one page of rows. A withered mark is one whose state is still ``withered`` and was last
changed in the window (withering is the last thing that changes a mark left to fade; a
repeat revives it, a promotion moves it on).

On SQLite an instant is text, stored with its fraction of a second or, when that is zero,
without it (as the driver writes it); a window's bounds are bound in the short form, which
orders rightly against both."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, String, func, literal, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from daemon.core.records import Mark, Seed, Tombstone
from daemon.store.mark_strength import marks, reinforcements
from daemon.store.seeds import seeds
from daemon.store.sql import driver_instant
from daemon.store.tombstones import tombstones

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Found(Generic[T]):
    """The newest of what a read found, and how many it found in all."""

    items: list[T]
    total: int


@dataclass(frozen=True, slots=True)
class Reinforced:
    """A mark reinforced in the window: how often, and when last."""

    mark: Mark
    times: int
    last_at: datetime


class Activity:
    """The reads of one window of time, inside the transaction of ``connection``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def marks_made(self, workspace: str, start: datetime, end: datetime, limit: int) -> Found[Mark]:
        made = self._within(marks.c.created_at, start, end)
        return self._marks(workspace, made, marks.c.created_at, limit)

    def marks_withered(
        self, workspace: str, start: datetime, end: datetime, limit: int
    ) -> Found[Mark]:
        withered = (marks.c.state == "withered", *self._within(marks.c.updated_at, start, end))
        return self._marks(workspace, withered, marks.c.updated_at, limit)

    def marks_reinforced(
        self, workspace: str, start: datetime, end: datetime, limit: int
    ) -> Found[Reinforced]:
        """The marks reinforced in the window, the most recently reinforced first."""
        times = func.count().label("times")
        last = func.max(reinforcements.c.reinforced_at).label("last_at")
        grouped = (
            select(reinforcements.c.mark_id, times, last)
            .join(marks, marks.c.id == reinforcements.c.mark_id)
            .where(self._of_workspace(workspace))
            .where(*self._within(reinforcements.c.reinforced_at, start, end))
            .group_by(reinforcements.c.mark_id)
        )
        total = self._count(grouped)
        rows = self.connection.execute(
            grouped.order_by(last.desc(), reinforcements.c.mark_id).limit(limit)
        ).all()
        found = {
            row.id: Mark.from_row(row._mapping)
            for row in self.connection.execute(
                select(marks).where(marks.c.id.in_([r.mark_id for r in rows]))
            )
        }
        items = [
            Reinforced(found[r.mark_id], int(r.times), driver_instant(r.last_at))
            for r in rows
            if r.mark_id in found
        ]
        return Found(items, total)

    def forgotten(
        self, workspace: str, start: datetime, end: datetime, limit: int
    ) -> Found[Tombstone]:
        query = select(tombstones).where(
            tombstones.c.workspace_id == workspace,
            *self._within(tombstones.c.forgotten_at, start, end),
        )
        rows = self.connection.execute(
            query.order_by(tombstones.c.forgotten_at.desc(), tombstones.c.id).limit(limit)
        )
        return Found([Tombstone.from_row(r._mapping) for r in rows], self._count(query))

    def seeds_planted(
        self, workspace: str, start: datetime, end: datetime, limit: int
    ) -> Found[Seed]:
        return self._seeds(workspace, seeds.c.planted_at, start, end, limit)

    def seeds_reviewed(
        self, workspace: str, start: datetime, end: datetime, limit: int
    ) -> Found[Seed]:
        """Seeds reviewed in the window and still standing as reviewed (an undone review
        is no review)."""
        return self._seeds(workspace, seeds.c.reviewed_at, start, end, limit)

    def _marks(
        self, workspace: str, where: tuple[ColumnElement[bool], ...], newest: Any, limit: int
    ) -> Found[Mark]:
        query = select(marks).where(self._of_workspace(workspace), *where)
        rows = self.connection.execute(query.order_by(newest.desc(), marks.c.id).limit(limit))
        return Found([Mark.from_row(r._mapping) for r in rows], self._count(query))

    def _seeds(
        self, workspace: str, when: Any, start: datetime, end: datetime, limit: int
    ) -> Found[Seed]:
        query = select(seeds).where(
            seeds.c.workspace_id == workspace, *self._within(when, start, end)
        )
        rows = self.connection.execute(query.order_by(when.desc(), seeds.c.id).limit(limit))
        return Found([Seed.from_row(r._mapping) for r in rows], self._count(query))

    def _of_workspace(self, workspace: str) -> ColumnElement[bool]:
        """The marks of ``workspace``. On SQLite as an expression no index serves: there the
        (workspace, subject) index would be read for nearly every row of a store that holds
        one workspace, then each row looked up (six times the CPU of reading the table
        through, measured on 100,000 marks), and the reinforcements' own time index could
        not lead."""
        column = marks.c.workspace_id
        if self.connection.dialect.name == "sqlite":
            column = column.concat("")
        matched: ColumnElement[bool] = column == workspace
        return matched

    def _within(
        self, column: Any, start: datetime, end: datetime
    ) -> tuple[ColumnElement[bool], ...]:
        if self.connection.dialect.name != "sqlite":
            return (column >= start, column < end)
        # "…22:00:00" sorts at or before both forms of a row at that instant ("…22:00:00",
        # "…22:00:00.000000") and after every earlier row; "…22:00:00.000000" would sort
        # after the short form of its own instant.
        return (column >= _text(start), column < _text(end))

    def _count(self, query: Select[Any]) -> int:
        counted = select(func.count()).select_from(query.subquery())
        return int(self.connection.execute(counted).scalar_one())


def _text(instant: datetime) -> Any:
    """``instant`` as SQLite's text of it in UTC: its fraction of a second only if any."""
    return literal(instant.astimezone(UTC).replace(tzinfo=None).isoformat(" "), String())
