"""Queries on seeds: proposals a human reviews. Nothing here touches a file."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from daemon.core.records import Seed
from daemon.store.sql import insert_or_ignore
from daemon.store.tables import SeedTable

seeds = SeedTable.__table__  # type: ignore[attr-defined]

SEED_STATES = ("pending", "accepted", "rejected")


def insert_seed(connection: Connection, seed: Seed) -> bool:
    return insert_or_ignore(connection, seeds, seed.to_row())


def get_seed(connection: Connection, seed_id: str) -> Seed | None:
    row = connection.execute(select(seeds).where(seeds.c.id == seed_id)).first()
    return None if row is None else Seed.from_row(row._mapping)


def list_seeds(connection: Connection, workspace: str, state: str | None = None) -> list[Seed]:
    query = select(seeds).where(seeds.c.workspace_id == workspace)
    if state is not None:
        query = query.where(seeds.c.state == state)
    rows = connection.execute(query.order_by(seeds.c.planted_at.desc(), seeds.c.id))
    return [Seed.from_row(row._mapping) for row in rows]


def review_seed(
    connection: Connection, seed_id: str, decision: str, reviewer: str, at: datetime
) -> bool:
    """Move a *pending* seed to ``decision``; False if it was not pending."""
    result = connection.execute(
        update(seeds)
        .where(seeds.c.id == seed_id, seeds.c.state == "pending")
        .values(state=decision, reviewed_at=at, reviewed_by=reviewer, updated_at=at)
    )
    return result.rowcount == 1
