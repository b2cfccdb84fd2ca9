"""Seeds: proposals a human reviews. :class:`Seeds` names every operation on them once.
Nothing here touches a file."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.engine import Connection

from daemon.core.records import Seed
from daemon.store.sql import (
    in_chunks,
    insert_ignoring_duplicates,
    insert_or_ignore,
    streamed_rows,
    with_instants,
)
from daemon.store.tables import SeedTable

seeds = SeedTable.__table__  # type: ignore[attr-defined]

SEED_STATES = ("pending", "accepted", "rejected", "withered")


class Seeds:
    """Every operation on seeds, inside the transaction of ``connection``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def insert(self, seed: Seed) -> bool:
        return insert_or_ignore(self.connection, seeds, seed.to_row())

    def get(self, seed_id: str, workspace: str) -> Seed | None:
        """The seed, if it exists in ``workspace`` (another workspace's seed is not there)."""
        row = self.connection.execute(
            select(seeds).where(seeds.c.id == seed_id, seeds.c.workspace_id == workspace)
        ).first()
        return None if row is None else Seed.from_row(row._mapping)

    def listing(self, workspace: str, state: str | None = None) -> list[Seed]:
        """Newest first."""
        query = select(seeds).where(seeds.c.workspace_id == workspace)
        if state is not None:
            query = query.where(seeds.c.state == state)
        rows = self.connection.execute(query.order_by(seeds.c.planted_at.desc(), seeds.c.id))
        return [Seed.from_row(row._mapping) for row in rows]

    def based_on(self, workspace: str, mark_id: str) -> list[Seed]:
        """The workspace's seeds that name ``mark_id`` among the marks they are based on
        (its promotion history), oldest first."""
        if self.connection.dialect.name == "sqlite":
            element = func.json_each(seeds.c.based_on_marks).table_valued("value")
        else:
            element = func.json_array_elements_text(seeds.c.based_on_marks).table_valued("value")
        based = select(element.c.value).where(element.c.value == mark_id).exists()
        rows = self.connection.execute(
            select(seeds)
            .where(seeds.c.workspace_id == workspace, based)
            .order_by(seeds.c.planted_at, seeds.c.id)
        )
        return [Seed.from_row(row._mapping) for row in rows]

    def review(self, seed_id: str, decision: str, reviewer: str, at: datetime) -> bool:
        """Move a *pending* seed to ``decision``; False if it was not pending."""
        result = self.connection.execute(
            update(seeds)
            .where(seeds.c.id == seed_id, seeds.c.state == "pending")
            .values(state=decision, reviewed_at=at, reviewed_by=reviewer, updated_at=at)
        )
        return result.rowcount == 1

    def undo_review(self, seed_id: str, at: datetime) -> bool:
        """Make a reviewed seed pending again; False if it was not accepted or rejected."""
        result = self.connection.execute(
            update(seeds)
            .where(seeds.c.id == seed_id, seeds.c.state.in_(("accepted", "rejected")))
            .values(state="pending", reviewed_at=None, reviewed_by=None, updated_at=at)
        )
        return result.rowcount == 1

    def wither(self, workspace: str, planted_before: datetime, at: datetime) -> int:
        """Pending seeds planted before ``planted_before`` wither; how many did."""
        result = self.connection.execute(
            update(seeds)
            .where(
                seeds.c.workspace_id == workspace,
                seeds.c.state == "pending",
                seeds.c.planted_at < planted_before,
            )
            .values(state="withered", withered_at=at, updated_at=at)
        )
        return result.rowcount

    def withered_between(self, workspace: str, start: datetime, end: datetime) -> int:
        """How many seeds withered in ``(start, end]``."""
        count = self.connection.execute(
            select(func.count()).where(
                seeds.c.workspace_id == workspace,
                seeds.c.state == "withered",
                seeds.c.withered_at > start,
                seeds.c.withered_at <= end,
            )
        ).scalar()
        return int(count or 0)

    def oldest_pending(self, workspace: str, limit: int) -> tuple[int, list[Seed]]:
        """How many seeds are pending, and the ``limit`` oldest of them."""
        pending = (seeds.c.workspace_id == workspace, seeds.c.state == "pending")
        count = self.connection.execute(select(func.count()).where(*pending)).scalar()
        rows = self.connection.execute(
            select(seeds).where(*pending).order_by(seeds.c.planted_at, seeds.c.id).limit(limit)
        )
        return int(count or 0), [Seed.from_row(row._mapping) for row in rows]

    def erase(self, seed_ids: Sequence[str]) -> None:
        """Delete these seeds (``memory.forget``): a seed is its text, nothing of it stays."""
        for chunk in in_chunks(seed_ids):
            self.connection.execute(delete(seeds).where(seeds.c.id.in_(chunk)))

    def all_rows(self) -> Iterator[dict[str, Any]]:
        """Every seed as its column mapping, by id (for export)."""
        return streamed_rows(self.connection, select(seeds).order_by("id"))

    def restore(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert exported seeds whose ids are not stored yet (import)."""
        if rows:
            dialect = self.connection.dialect.name
            statement = insert_ignoring_duplicates(seeds, dialect)
            self.connection.execute(statement, with_instants(seeds, rows))
