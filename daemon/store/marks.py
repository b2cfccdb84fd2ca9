"""Queries on marks and their reinforcements."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from daemon.memory.strength import WITHER_THRESHOLD, strength
from daemon.memory.subjects import escape_like, normalize_subject
from daemon.models.tables import Mark, Reinforcement

marks = Mark.__table__  # type: ignore[attr-defined]
reinforcements = Reinforcement.__table__  # type: ignore[attr-defined]

MARK_STATES = ("active", "withered", "promoted")


def _mark(row: Any) -> Mark:
    return Mark(**row._mapping)


def insert_mark(connection: Connection, mark: Mark) -> bool:
    """Insert unless a mark with this id exists (ids are derived from what made the mark,
    so a repeat is the same mark). True if inserted."""
    if connection.execute(select(marks.c.id).where(marks.c.id == mark.id)).first():
        return False
    connection.execute(insert(marks), [mark.model_dump()])
    return True


def get_mark(connection: Connection, mark_id: str) -> Mark | None:
    row = connection.execute(select(marks).where(marks.c.id == mark_id)).first()
    return None if row is None else _mark(row)


def subject_condition(prefix: str) -> ColumnElement[bool] | None:
    """SQL for the segment-prefix rule. The ``LIKE 'p%'`` term is what the index serves (a
    range scan); the second term trims ``user.sleepover`` from ``user.sleep``."""
    prefix = normalize_subject(prefix)
    if not prefix:
        return None
    escaped = escape_like(prefix)
    return and_(
        marks.c.subject.like(escaped + "%", escape="\\"),
        or_(marks.c.subject == prefix, marks.c.subject.like(escaped + ".%", escape="\\")),
    )


def find_marks(
    connection: Connection,
    workspace: str,
    prefix: str,
    states: Sequence[str] = ("active",),
    reinforced_since: datetime | None = None,
) -> list[Mark]:
    query = select(marks).where(marks.c.workspace_id == workspace, marks.c.state.in_(states))
    condition = subject_condition(prefix)
    if condition is not None:
        query = query.where(condition)
    if reinforced_since is not None:
        query = query.where(marks.c.last_reinforced_at >= reinforced_since)
    return [_mark(row) for row in connection.execute(query)]


def find_same_observation(
    connection: Connection, workspace: str, subject: str, observation: str
) -> Mark | None:
    """The active or withered mark saying the same thing about the same subject."""
    row = connection.execute(
        select(marks)
        .where(
            marks.c.workspace_id == workspace,
            marks.c.subject == subject,
            marks.c.observation == observation,
            marks.c.state.in_(("active", "withered")),
        )
        .order_by(marks.c.first_observed_at)
        .limit(1)
    ).first()
    return None if row is None else _mark(row)


def reinforce(connection: Connection, mark: Mark, reinforcement: Reinforcement) -> bool:
    """Record a reinforcement (once per id), count it, and revive a withered mark."""
    exists = connection.execute(
        select(reinforcements.c.id).where(reinforcements.c.id == reinforcement.id)
    ).first()
    if exists:
        return False
    connection.execute(insert(reinforcements), [reinforcement.model_dump()])
    connection.execute(
        update(marks)
        .where(marks.c.id == mark.id)
        .values(
            reinforcement_count=marks.c.reinforcement_count + 1,
            last_reinforced_at=max(mark.last_reinforced_at, reinforcement.reinforced_at),
            state="active",
            updated_at=reinforcement.reinforced_at,
        )
    )
    return True


def reinforcements_of(
    connection: Connection, mark_ids: Iterable[str]
) -> dict[str, list[Reinforcement]]:
    ids = list(mark_ids)
    found: dict[str, list[Reinforcement]] = defaultdict(list)
    for start in range(0, len(ids), 500):  # bounded IN lists
        for row in connection.execute(
            select(reinforcements)
            .where(reinforcements.c.mark_id.in_(ids[start : start + 500]))
            .order_by(reinforcements.c.reinforced_at)
        ):
            found[row.mark_id].append(Reinforcement(**row._mapping))
    return found


def set_state(connection: Connection, mark_ids: Sequence[str], state: str, now: datetime) -> int:
    if not mark_ids:
        return 0
    result = connection.execute(
        update(marks).where(marks.c.id.in_(mark_ids)).values(state=state, updated_at=now)
    )
    return result.rowcount


def wither_sweep(connection: Connection, workspace: str, now: datetime) -> list[str]:
    """Active marks whose current strength fell below the threshold become withered."""
    active = find_marks(connection, workspace, "", states=("active",))
    boosts = reinforcements_of(connection, [m.id for m in active if m.reinforcement_count])
    fading = [
        m.id
        for m in active
        if strength(
            m.initial_strength,
            m.decay_rate,
            m.first_observed_at,
            ((r.reinforced_at, r.strength_delta) for r in boosts.get(m.id, ())),
            now,
        ).value
        < WITHER_THRESHOLD
    ]
    set_state(connection, fading, "withered", now)
    return fading
