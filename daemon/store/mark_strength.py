"""Marks by strength: which marks match a recall (workspace, subject prefix, states, since,
provenance) and how strong each is now, read from the few columns strength needs and the
marks' reinforcements. :class:`MarkStrength` is the reading half of
:class:`~daemon.store.marks.Marks`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Select, bindparam, func, or_, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from daemon.core.records import Reinforcement
from daemon.core.strength import Strength, current_strength, strength
from daemon.core.subjects import normalize_subject
from daemon.store.sql import driver_instant, escape_like, in_chunks
from daemon.store.tables import MarkTable, ReinforcementTable

marks = MarkTable.__table__  # type: ignore[attr-defined]
reinforcements = ReinforcementTable.__table__  # type: ignore[attr-defined]


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


_SCORING_COLUMNS = (
    marks.c.id,
    marks.c.initial_strength,
    marks.c.half_life_days,
    marks.c.first_observed_at,
    marks.c.last_reinforced_at,
    marks.c.reinforcement_count,
)


# Read by id on the driver: through SQLAlchemy, the IN list's compilation and the instants'
# type processing made a third of scoring the 200 marks a question's words found in three
# years of notes (paired: 2.85 against 1.91 ms).
_BY_ID_COLUMNS = (
    "id, initial_strength, half_life_days, first_observed_at, last_reinforced_at,"
    " reinforcement_count, workspace_id, state, provenance"
)


@cache
def _scoring_by_id(placeholder: str, count: int) -> str:
    marks_in = ", ".join([placeholder] * count)
    return f"SELECT {_BY_ID_COLUMNS} FROM memory_marks WHERE id IN ({marks_in})"


class MarkStrength:
    """The marks matching a recall and their strength, inside the transaction of
    ``connection``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def score(
        self,
        workspace: str,
        prefix: str,
        states: Sequence[str],
        now: datetime,
        reinforced_since: datetime | None = None,
        provenances: Sequence[str] | None = None,
    ) -> list[Scored]:
        """Every matching mark's strength at ``now`` (of the given provenances, if any are
        given). Only the columns strength needs are read (no JSON), so ranking many marks
        stays cheap; fetch the winners with :meth:`Marks.get_many`."""
        rows = self._matching(
            _SCORING_COLUMNS, workspace, prefix, states, reinforced_since, provenances
        )
        return self._scored(rows, now)

    def score_filtered(
        self,
        workspace: str,
        now: datetime,
        *,
        text: str = "",
        subject_prefix: str = "",
        states: Sequence[str] = (),
        observed_by: str = "",
    ) -> list[Scored]:
        """Like :meth:`score`, for the workspace's marks that pass every filter given (a
        browser's search): ``text`` a case-insensitive substring of the subject or the
        observation, ``subject_prefix`` a plain prefix of the subject (``user.foo`` finds
        ``user.food``), ``states`` (none: every state), ``observed_by``."""
        query = select(*_SCORING_COLUMNS).where(marks.c.workspace_id == workspace)
        if text:
            pattern = "%" + escape_like(text.lower()) + "%"
            query = query.where(
                or_(
                    func.lower(marks.c.observation).like(pattern, escape="\\"),
                    func.lower(marks.c.subject).like(pattern, escape="\\"),
                )
            )
        prefix = normalize_subject(subject_prefix)
        if prefix:
            query = query.where(marks.c.subject.like(escape_like(prefix) + "%", escape="\\"))
        if states:
            query = query.where(marks.c.state.in_(states))
        if observed_by:
            query = query.where(marks.c.observed_by == observed_by)
        return self._scored(self.connection.execute(query).all(), now)

    def score_among(
        self,
        mark_ids: Sequence[str],
        workspace: str,
        states: Sequence[str],
        now: datetime,
        reinforced_since: datetime | None = None,
        provenances: Sequence[str] | None = None,
    ) -> list[Scored]:
        """Like :meth:`score`, for the marks with these ids. Looked up by primary key alone
        (then filtered here), so no plan can scan a whole workspace for a few ids."""
        placeholder = "?" if self.connection.dialect.name == "sqlite" else "%s"
        rows: list[Any] = []
        for chunk in in_chunks(mark_ids):
            statement = _scoring_by_id(placeholder, len(chunk))
            rows += self.connection.exec_driver_sql(statement, tuple(chunk)).all()
        kept = []
        for mark_id, initial, half_life, first, last, count, in_workspace, state, made in rows:
            if in_workspace != workspace or state not in states:
                continue
            last = driver_instant(last)
            if (reinforced_since is None or last >= reinforced_since) and (
                provenances is None or made in provenances
            ):
                kept.append((mark_id, initial, half_life, driver_instant(first), last, count))
        return self._scored(kept, now)

    def _scored(self, rows: Sequence[Any], now: datetime) -> list[Scored]:
        """Strength at ``now`` of rows holding the ``_SCORING_COLUMNS``."""
        boosts = {
            mark_id: tuple((r.reinforced_at, r.strength_delta) for r in found)
            for mark_id, found in self.reinforcements_of(
                [row[0] for row in rows if row[5]]  # id, if reinforcement_count
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

    def reinforcements_of(self, mark_ids: Iterable[str]) -> dict[str, list[Reinforcement]]:
        ids = list(mark_ids)
        found: dict[str, list[Reinforcement]] = defaultdict(list)
        for chunk in in_chunks(ids):
            for row in self.connection.execute(
                select(reinforcements)
                .where(reinforcements.c.mark_id.in_(chunk))
                .order_by(reinforcements.c.reinforced_at)
            ):
                found[row.mark_id].append(Reinforcement.from_row(row._mapping))
        return found

    def _matching(
        self,
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
        return list(self.connection.execute(query, parameters).all())
