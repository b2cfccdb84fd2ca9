"""Seeds: proposals a human reviews. :class:`Seeds` names every operation on them once.
Nothing here touches a file."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from daemon.core.records import Seed
from daemon.store.sql import insert_or_ignore
from daemon.store.tables import SeedTable

seeds = SeedTable.__table__  # type: ignore[attr-defined]

SEED_STATES = ("pending", "accepted", "rejected")


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

    def review(self, seed_id: str, decision: str, reviewer: str, at: datetime) -> bool:
        """Move a *pending* seed to ``decision``; False if it was not pending."""
        result = self.connection.execute(
            update(seeds)
            .where(seeds.c.id == seed_id, seeds.c.state == "pending")
            .values(state=decision, reviewed_at=at, reviewed_by=reviewer, updated_at=at)
        )
        return result.rowcount == 1
