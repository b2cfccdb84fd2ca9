"""Queries on marks and their reinforcements."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from daemon.memory.strength import WITHER_THRESHOLD, strength
from daemon.memory.subjects import escape_like, normalize_subject
from daemon.models.memory import Mark, Reinforcement
from daemon.models.tables import MarkTable, ReinforcementTable
from daemon.store.sql import insert_ignoring_duplicates

marks = MarkTable.__table__  # type: ignore[attr-defined]
reinforcements = ReinforcementTable.__table__  # type: ignore[attr-defined]

MARK_STATES = ("active", "withered", "promoted")


def _mark(row: Any) -> Mark:
    return Mark.from_row(row._mapping)


def fingerprint(subject: str, observation: str) -> str:
    return hashlib.sha256(f"{subject}\x1f{observation}".encode()).hexdigest()[:32]


def insert_marks(connection: Connection, new: Sequence[Mark]) -> None:
    """Insert marks in one statement, skipping ids already stored (ids are derived from
    what made a mark, so a repeat is the same mark)."""
    if new:
        rows = [m.to_row() | {"fingerprint": fingerprint(m.subject, m.observation)} for m in new]
        connection.execute(insert_ignoring_duplicates(marks, connection.dialect.name), rows)


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


ObservationKey = tuple[str, str, str]  # workspace, normalized subject, observation text


def find_same_observations(
    connection: Connection, keys: Iterable[ObservationKey]
) -> dict[ObservationKey, Mark]:
    """For each key, the oldest active or withered mark saying that (found by fingerprint
    through an index, however long the text)."""
    wanted = set(keys)
    found: dict[ObservationKey, Mark] = {}
    if not wanted:
        return found
    rows = connection.execute(
        select(marks)
        .where(
            marks.c.workspace_id.in_({w for w, _, _ in wanted}),
            marks.c.fingerprint.in_({fingerprint(s, o) for _, s, o in wanted}),
            marks.c.state.in_(("active", "withered")),
        )
        .order_by(marks.c.first_observed_at)
    )
    for row in rows:
        key = (row.workspace_id, row.subject, row.observation)
        if key in wanted and key not in found:
            found[key] = _mark(row)
    return found


def reinforce_many(connection: Connection, boosts: Sequence[tuple[Mark, Reinforcement]]) -> None:
    """Record reinforcements (each id once), count them on their marks, revive withered ones.
    ``Mark.last_reinforced_at`` must be the mark's stored value."""
    if not boosts:
        return
    ids = [r.id for _, r in boosts]
    stored = set(
        connection.execute(
            select(reinforcements.c.id).where(reinforcements.c.id.in_(ids))
        ).scalars()
    )
    fresh = [(m, r) for m, r in boosts if r.id not in stored]
    if not fresh:
        return
    connection.execute(insert(reinforcements), [r.to_row() for _, r in fresh])
    counts: dict[str, int] = defaultdict(int)
    latest: dict[str, datetime] = {}
    for mark, reinforcement in fresh:
        counts[mark.id] += 1
        latest[mark.id] = max(
            latest.get(mark.id, mark.last_reinforced_at), reinforcement.reinforced_at
        )
    connection.execute(
        _COUNT_REINFORCEMENTS,
        [{"mark_id": i, "n": counts[i], "at": latest[i]} for i in counts],
    )


_COUNT_REINFORCEMENTS = (
    update(marks)
    .where(marks.c.id == bindparam("mark_id"))
    .values(
        reinforcement_count=marks.c.reinforcement_count + bindparam("n"),
        last_reinforced_at=bindparam("at"),
        state="active",
        updated_at=bindparam("at"),
    )
)


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
            found[row.mark_id].append(Reinforcement.from_row(row._mapping))
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
