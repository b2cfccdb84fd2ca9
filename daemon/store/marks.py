"""Queries on marks and their reinforcements."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Select, bindparam, insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from daemon.core.likeness import normalize_text
from daemon.core.records import Mark, Reinforcement
from daemon.core.strength import WITHER_THRESHOLD, Strength, current_strength, strength
from daemon.core.subjects import escape_like, normalize_subject
from daemon.store.sql import insert_ignoring_duplicates
from daemon.store.tables import MarkTable, ReinforcementTable

marks = MarkTable.__table__  # type: ignore[attr-defined]
reinforcements = ReinforcementTable.__table__  # type: ignore[attr-defined]

MARK_STATES = ("active", "withered", "promoted")


def _mark(row: Any) -> Mark:
    return Mark.from_row(row._mapping)


def fingerprint(subject: str, observation: str) -> str:
    """Finds the marks saying the same thing under a subject through an index: case,
    whitespace and punctuation aside (:func:`daemon.core.likeness.normalize_text`)."""
    normalized = normalize_text(observation)
    return hashlib.sha256(f"{subject}\x1f{normalized}".encode()).hexdigest()[:32]


def insert_marks(connection: Connection, new: Sequence[Mark]) -> None:
    """Insert marks in one statement, skipping ids already stored (ids are derived from
    what made a mark, so a repeat is the same mark)."""
    if new:
        rows = [m.to_row() | {"fingerprint": fingerprint(m.subject, m.observation)} for m in new]
        connection.execute(insert_ignoring_duplicates(marks, connection.dialect.name), rows)


def get_mark(connection: Connection, mark_id: str) -> Mark | None:
    row = connection.execute(select(marks).where(marks.c.id == mark_id)).first()
    return None if row is None else _mark(row)


@cache
def _matching_query(
    columns: tuple[ColumnElement[Any], ...],
    states: tuple[str, ...],
    prefix: bool,
    since: bool,
    provenances: tuple[str, ...] | None = None,
) -> Select[Any]:
    """Marks of a workspace in some states, optionally under a subject prefix and reinforced
    since an instant. Built once per shape, with bound parameters.

    The subject rule is two terms: ``LIKE 'p%'`` is what the (workspace, subject) index
    serves as a range scan; the second trims ``user.sleepover`` from ``user.sleep``."""
    query = select(*columns).where(
        marks.c.workspace_id == bindparam("workspace"), marks.c.state.in_(states)
    )
    if prefix:
        query = query.where(
            marks.c.subject.like(bindparam("under"), escape="\\"),
            or_(
                marks.c.subject == bindparam("subject"),
                marks.c.subject.like(bindparam("below"), escape="\\"),
            ),
        )
    if since:
        query = query.where(marks.c.last_reinforced_at >= bindparam("since"))
    if provenances is not None:
        query = query.where(marks.c.provenance.in_(provenances))
    return query


def _matching(
    connection: Connection,
    columns: tuple[ColumnElement[Any], ...],
    workspace: str,
    prefix: str,
    states: Sequence[str],
    reinforced_since: datetime | None,
    provenances: Sequence[str] | None = None,
) -> list[Any]:
    subject = normalize_subject(prefix)
    escaped = escape_like(subject)
    query = _matching_query(
        columns,
        tuple(states),
        bool(subject),
        reinforced_since is not None,
        None if provenances is None else tuple(sorted(provenances)),
    )
    parameters = {
        "workspace": workspace,
        "subject": subject,
        "under": escaped + "%",
        "below": escaped + ".%",
        "since": reinforced_since,
    }
    return list(connection.execute(query, parameters).all())


def find_marks(
    connection: Connection,
    workspace: str,
    prefix: str,
    states: Sequence[str] = ("active",),
    reinforced_since: datetime | None = None,
) -> list[Mark]:
    rows = _matching(connection, (marks,), workspace, prefix, states, reinforced_since)
    return [_mark(row) for row in rows]


def get_marks(connection: Connection, mark_ids: Sequence[str]) -> list[Mark]:
    """The marks with these ids, in the order given."""
    if not mark_ids:
        return []
    found = {
        row.id: _mark(row)
        for row in connection.execute(select(marks).where(marks.c.id.in_(mark_ids)))
    }
    return [found[i] for i in mark_ids if i in found]


@dataclass(frozen=True, slots=True)
class Scored:
    """A mark's current strength, read without the rest of the mark."""

    mark_id: str
    value: float
    last_reinforced_at: datetime
    initial: float
    half_life_days: float
    first_observed_at: datetime
    reinforcements: tuple[tuple[datetime, float], ...]

    def breakdown(self, now: datetime) -> Strength:
        return strength(
            self.initial, self.half_life_days, self.first_observed_at, self.reinforcements, now
        )


_SCORING_COLUMNS = (
    marks.c.id,
    marks.c.initial_strength,
    marks.c.decay_rate,
    marks.c.first_observed_at,
    marks.c.last_reinforced_at,
    marks.c.reinforcement_count,
)


def score_marks(
    connection: Connection,
    workspace: str,
    prefix: str,
    states: Sequence[str],
    now: datetime,
    reinforced_since: datetime | None = None,
    provenances: Sequence[str] | None = None,
) -> list[Scored]:
    """Every matching mark's strength at ``now`` (of the given provenances, if any are
    given). Only the columns strength needs are read (no JSON), so ranking many marks stays
    cheap; fetch the winners with :func:`get_marks`."""
    rows = _matching(
        connection, _SCORING_COLUMNS, workspace, prefix, states, reinforced_since, provenances
    )
    boosts = {
        mark_id: tuple((r.reinforced_at, r.strength_delta) for r in found)
        for mark_id, found in reinforcements_of(
            connection, [row.id for row in rows if row.reinforcement_count]
        ).items()
    }
    scored = []
    for mark_id, initial, half_life, first_observed, last_reinforced, _ in rows:
        parts = boosts.get(mark_id, ())
        value = current_strength(initial, half_life, first_observed, parts, now)
        scored.append(
            Scored(mark_id, value, last_reinforced, initial, half_life, first_observed, parts)
        )
    return scored


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
    scored = score_marks(connection, workspace, "", ("active",), now)
    fading = [s.mark_id for s in scored if s.value < WITHER_THRESHOLD]
    set_state(connection, fading, "withered", now)
    return fading
