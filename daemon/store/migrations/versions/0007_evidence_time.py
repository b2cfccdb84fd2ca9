"""Marks and reinforcements made from a day's log are dated by that day.

Until now, what consolidation made from a day's line was dated when the consolidation ran:
an old journal imported today looked fresh. Every mark and reinforcement whose evidence
names a ``daily_file`` is dated at that day's noon, no later than it was dated before. The
configured time zone is not known here, so the noon is UTC's (within half a day of any
zone's; what consolidation makes from now on uses the zone's noon).

Then each mark touched keeps what the store assumes of every mark: it is first observed at
its earliest evidence, and a reinforcement dated earlier trades places with it (time,
observer and evidence, as ``daemon.core.records.in_evidence_order`` does for new ones);
it was last reinforced at its latest. The schema does not change; the dates replaced are
not kept, so the downgrade leaves the data as it is.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INSTANT = sa.DateTime(timezone=True)
CHUNK = 500

marks = sa.table(
    "memory_marks",
    sa.column("id", sa.String()),
    sa.column("evidence", sa.JSON()),
    sa.column("observed_by", sa.String()),
    sa.column("first_observed_at", INSTANT),
    sa.column("last_reinforced_at", INSTANT),
)
reinforcements = sa.table(
    "memory_mark_reinforcements",
    sa.column("id", sa.String()),
    sa.column("mark_id", sa.String()),
    sa.column("evidence", sa.JSON()),
    sa.column("reinforced_by", sa.String()),
    sa.column("reinforced_at", INSTANT),
)


@dataclass(frozen=True)
class Said:
    """One piece of a mark's evidence: when, by whom, what."""

    at: datetime
    by: str
    evidence: dict[str, Any]


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _redated(said: Said) -> Said:
    """Dated at the noon of the day its evidence names, if it names one."""
    name = said.evidence.get("daily_file") if isinstance(said.evidence, dict) else None
    try:
        day = date.fromisoformat(str(name).removesuffix(".md"))
    except ValueError:
        return said
    noon = datetime.combine(day, time(12), tzinfo=UTC)
    return replace(said, at=min(noon, said.at))


def _in_order(first: Said, later: list[Said]) -> tuple[Said, list[Said]]:
    """The earliest evidence first, each later one in the place of the one it displaced."""
    rows = list(later)
    for index in sorted(range(len(rows)), key=lambda i: rows[i].at):
        if rows[index].at < first.at:
            first, rows[index] = rows[index], first
    return first, rows


def upgrade() -> None:
    connection = op.get_bind()
    sqlite = connection.dialect.name == "sqlite"

    def stored(value: datetime) -> datetime:
        return value.replace(tzinfo=None) if sqlite else value

    def names_a_day(evidence: Any) -> Any:
        return sa.cast(evidence, sa.Text).like('%"daily_file"%')

    touched = set(
        connection.execute(sa.select(marks.c.id).where(names_a_day(marks.c.evidence))).scalars()
    ) | set(
        connection.execute(
            sa.select(reinforcements.c.mark_id).where(names_a_day(reinforcements.c.evidence))
        ).scalars()
    )
    ordered = sorted(touched)
    for start in range(0, len(ordered), CHUNK):
        chunk = ordered[start : start + CHUNK]
        boosts: dict[str, list[Any]] = {}
        for row in connection.execute(
            sa.select(reinforcements)
            .where(reinforcements.c.mark_id.in_(chunk))
            .order_by(reinforcements.c.id)
        ):
            boosts.setdefault(row.mark_id, []).append(row)
        for mark in connection.execute(sa.select(marks).where(marks.c.id.in_(chunk))):
            old_first = Said(_utc(mark.first_observed_at), mark.observed_by, mark.evidence)
            rows = boosts.get(mark.id, [])
            old_later = [Said(_utc(r.reinforced_at), r.reinforced_by, r.evidence) for r in rows]
            first, later = _in_order(_redated(old_first), [_redated(s) for s in old_later])
            last = max([first.at, *(s.at for s in later)])
            if (first, last) != (old_first, _utc(mark.last_reinforced_at)):
                connection.execute(
                    sa.update(marks)
                    .where(marks.c.id == mark.id)
                    .values(
                        first_observed_at=stored(first.at),
                        last_reinforced_at=stored(last),
                        observed_by=first.by,
                        evidence=first.evidence,
                    )
                )
            for row, old, new in zip(rows, old_later, later, strict=True):
                if new != old:
                    connection.execute(
                        sa.update(reinforcements)
                        .where(reinforcements.c.id == row.id)
                        .values(
                            reinforced_at=stored(new.at),
                            reinforced_by=new.by,
                            evidence=new.evidence,
                        )
                    )


def downgrade() -> None:
    """Nothing in the schema to undo; the earlier dates were not kept."""
