"""Marks and their reinforcements: :class:`Marks` names every operation on them once and
returns :class:`~daemon.core.records.Mark` records."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, case, exists, func, insert, literal_column, or_, select, update
from sqlalchemy.sql.elements import ColumnElement

from daemon.core.records import (
    CURRENT_MARK_STATES,
    MARK_STATES,
    Mark,
    Reinforcement,
    in_evidence_order,
)
from daemon.store.mark_rows import (
    fingerprint,
    insert_marks,
    oldest_with_fingerprint,
    recent_texts,
)
from daemon.store.mark_strength import MarkStrength, Scored, marks, reinforcements
from daemon.store.sql import in_chunks, insert_ignoring_duplicates, streamed_rows, with_instants

__all__ = ["MARK_STATES", "Marks", "Scored", "fingerprint"]

_BY_IDS = select(marks).where(marks.c.id.in_(bindparam("ids", expanding=True)))


@dataclass(frozen=True, slots=True)
class MarkText:
    """What a mark says, for indexing its words."""

    id: str
    workspace_id: str
    observation: str
    created_at: datetime


_COUNT_REINFORCEMENTS = (
    update(marks)
    .where(marks.c.id == bindparam("mark_id"))
    .values(
        reinforcement_count=marks.c.reinforcement_count + bindparam("n"),
        last_reinforced_at=bindparam("at"),
        # A repeat revives a withered mark; a promoted one stays promoted.
        state=case((marks.c.state == "withered", "active"), else_=marks.c.state),
        updated_at=bindparam("at"),
    )
)

_MOVE_FIRST_OBSERVATION = (  # earlier evidence came later: see in_evidence_order
    update(marks)
    .where(marks.c.id == bindparam("mark_id"))
    .values(
        first_observed_at=bindparam("first"),
        observed_by=bindparam("by"),
        evidence=bindparam("first_evidence", type_=marks.c.evidence.type),
    )
)


class Marks(MarkStrength):
    """Every operation on marks and reinforcements, inside the transaction of ``connection``."""

    def insert(self, new: Sequence[Mark]) -> None:
        """Insert marks in one statement, skipping ids already stored (ids are derived from
        what made a mark, so a repeat is the same mark)."""
        if new:
            insert_marks(self.connection, new)

    def get(self, mark_id: str) -> Mark | None:
        row = self.connection.execute(select(marks).where(marks.c.id == mark_id)).first()
        return None if row is None else Mark.from_row(row._mapping)

    def made_by(self, signal_id: str) -> Mark | None:
        """The mark an observation signal created or reinforced, once it is delivered."""
        for made_id in Mark.ids_for_signal(signal_id):
            mark = self.get(made_id)
            if mark is not None:
                return mark
        mark_id = self.connection.execute(
            select(reinforcements.c.mark_id).where(
                reinforcements.c.id == Reinforcement.id_for_signal(signal_id)
            )
        ).scalar()
        return None if mark_id is None else self.get(mark_id)

    def get_many(self, mark_ids: Sequence[str]) -> list[Mark]:
        """The marks with these ids, in the order given (unknown ids left out)."""
        if not mark_ids:
            return []
        found = {
            row.id: Mark.from_row(row._mapping)
            for chunk in in_chunks(mark_ids)
            for row in self.connection.execute(_BY_IDS, {"ids": chunk})
        }
        return [found[i] for i in mark_ids if i in found]

    def find(
        self,
        workspace: str,
        prefix: str,
        states: Sequence[str] = ("active",),
        reinforced_since: datetime | None = None,
    ) -> list[Mark]:
        rows = self._matching((marks,), workspace, prefix, states, reinforced_since)
        return [Mark.from_row(row._mapping) for row in rows]

    def of_subject(self, workspace: str, subject: str) -> list[Mark]:
        """The marks of exactly ``subject`` (none below it), in every state."""
        query = select(marks).where(marks.c.workspace_id == workspace, marks.c.subject == subject)
        return [Mark.from_row(row._mapping) for row in self.connection.execute(query)]

    def observers(self, workspace: str) -> list[str]:
        """Who observed the workspace's marks, each once, in order."""
        query = select(marks.c.observed_by).distinct().where(marks.c.workspace_id == workspace)
        return sorted(self.connection.execute(query).scalars())

    def citing(self, workspace: str, daily_file: str) -> list[Mark]:
        """The workspace's marks whose evidence, or one of whose reinforcements' evidence,
        cites ``daily_file`` (its ``daily_file`` field)."""
        reinforced_cites = exists().where(
            reinforcements.c.mark_id == marks.c.id,
            reinforcements.c.evidence["daily_file"].as_string() == daily_file,
        )
        query = select(marks).where(
            marks.c.workspace_id == workspace,
            or_(marks.c.evidence["daily_file"].as_string() == daily_file, reinforced_cites),
        )
        return [Mark.from_row(row._mapping) for row in self.connection.execute(query)]

    # -- the text of every mark, for the free-text index (daemon.services.mark_search) -------

    def count_all(self) -> int:
        return int(self.connection.execute(select(func.count()).select_from(marks)).scalar_one())

    def forgotten_ids(self) -> set[str]:
        """Marks whose text ``memory.forget`` erased (through their partial index)."""
        # Spelled as the index's own condition (a bound value would not match it).
        query = select(marks.c.id).where(marks.c.state == literal_column("'forgotten'"))
        return set(self.connection.execute(query).scalars())

    def all_ids(self) -> set[str]:
        return set(self.connection.execute(select(marks.c.id)).scalars())

    def texts_created_since(self, instant: datetime) -> list[MarkText]:
        return self._texts(marks.c.created_at >= instant)

    def texts_of(self, mark_ids: Sequence[str]) -> list[MarkText]:
        found: list[MarkText] = []
        for chunk in in_chunks(mark_ids):
            found += self._texts(marks.c.id.in_(chunk))
        return found

    def _texts(self, where: ColumnElement[bool]) -> list[MarkText]:
        query = select(
            marks.c.id, marks.c.workspace_id, marks.c.observation, marks.c.created_at
        ).where(where)
        return [MarkText(*row) for row in self.connection.execute(query)]

    # -- what "no near-copies" reads (receptors/near_copies.py) ---------------------------

    def oldest_with_fingerprint(self, workspace: str, subject: str, fingerprint: str) -> str | None:
        """The id of the oldest current (active, withered or promoted) mark under the
        subject with ``fingerprint`` (through an index, however long the history)."""
        return oldest_with_fingerprint(self.connection, workspace, subject, fingerprint)

    def recent_texts(self, workspace: str, subject: str, count: int) -> list[tuple[str, str]]:
        """(id, text) of the subject's ``count`` most recently reinforced current (active,
        withered or promoted) marks, oldest first. It reads only narrow columns."""
        return recent_texts(self.connection, workspace, subject, count)

    def subjects(self, workspace: str) -> list[str]:
        """Every subject the workspace's live memory uses (active, withered or promoted):
        what consolidation offers its extractor to converge on, so never the subject of a
        retracted, corrected or forgotten mark."""
        return list(
            self.connection.execute(
                select(marks.c.subject)
                .distinct()
                .where(marks.c.workspace_id == workspace, marks.c.state.in_(CURRENT_MARK_STATES))
                .order_by(marks.c.subject)
            ).scalars()
        )

    def reinforce(self, boosts: Sequence[tuple[Mark, Reinforcement]]) -> None:
        """Record reinforcements (each id once) in the order of their evidence
        (:func:`~daemon.core.records.in_evidence_order`), count them on their marks, revive
        withered ones. ``Mark`` must be the mark's stored value."""
        if not boosts:
            return
        ids = [r.id for _, r in boosts]
        stored = set(
            self.connection.execute(
                select(reinforcements.c.id).where(reinforcements.c.id.in_(ids))
            ).scalars()
        )
        fresh, moved = in_evidence_order([(m, r) for m, r in boosts if r.id not in stored])
        if not fresh:
            return
        self.connection.execute(insert(reinforcements), [r.to_row() for _, r in fresh])
        if moved:
            self.connection.execute(
                _MOVE_FIRST_OBSERVATION,
                [
                    {
                        "mark_id": m.id,
                        "first": m.first_observed_at,
                        "by": m.observed_by,
                        "first_evidence": m.evidence,
                    }
                    for m in moved
                ],
            )
        counts: dict[str, int] = defaultdict(int)
        latest: dict[str, datetime] = {}
        for mark, reinforcement in fresh:
            counts[mark.id] += 1
            latest[mark.id] = max(
                latest.get(mark.id, mark.last_reinforced_at), reinforcement.reinforced_at
            )
        self.connection.execute(
            _COUNT_REINFORCEMENTS,
            [{"mark_id": i, "n": counts[i], "at": latest[i]} for i in counts],
        )

    def set_state(self, mark_ids: Sequence[str], state: str, now: datetime) -> int:
        if not mark_ids:
            return 0
        result = self.connection.execute(
            update(marks).where(marks.c.id.in_(mark_ids)).values(state=state, updated_at=now)
        )
        return result.rowcount

    def promote(self, mark_ids: Sequence[str], now: datetime) -> int:
        """Marks that still stand become promoted (an ended mark stays ended)."""
        return self._move(mark_ids, CURRENT_MARK_STATES, "promoted", now)

    def unpromote(self, mark_ids: Sequence[str], now: datetime) -> int:
        """Promoted marks become active again (an accepted seed's review was undone)."""
        return self._move(mark_ids, ("promoted",), "active", now)

    def end(
        self,
        mark_id: str,
        state: str,
        reason: str,
        now: datetime,
        superseded_by: str | None = None,
    ) -> bool:
        """A mark that still stands becomes superseded or retracted, keeping its text; False
        if it had already ended."""
        result = self.connection.execute(
            update(marks)
            .where(marks.c.id == mark_id, marks.c.state.in_(CURRENT_MARK_STATES))
            .values(
                state=state,
                superseded_by=superseded_by,
                ended_at=now,
                ended_reason=reason,
                updated_at=now,
            )
        )
        return result.rowcount == 1

    def chain(self, mark_id: str) -> list[Mark]:
        """The mark and every mark linked to it by corrections, oldest first."""
        found: dict[str, Mark] = {}
        todo = [mark_id]
        while todo:
            for mark in self.get_many([i for i in todo if i not in found]):
                found[mark.id] = mark
            todo = [
                link
                for mark in found.values()
                for link in (mark.supersedes, mark.superseded_by)
                if link is not None and link not in found
            ]
        return sorted(found.values(), key=lambda m: (m.first_observed_at, m.id))

    def erase(self, mark_ids: Sequence[str], reason: str, now: datetime) -> None:
        """Forget marks: their text, evidence and fingerprint (a hash of the text) and their
        reinforcements' evidence are erased; the rows stay, state ``forgotten``."""
        for ids in in_chunks(mark_ids):
            self.connection.execute(
                update(marks)
                .where(marks.c.id.in_(ids))
                .values(
                    observation="",
                    evidence={},
                    fingerprint="",
                    state="forgotten",
                    ended_at=func.coalesce(marks.c.ended_at, now),
                    ended_reason=reason,
                    updated_at=now,
                )
            )
            self.connection.execute(
                update(reinforcements).where(reinforcements.c.mark_id.in_(ids)).values(evidence={})
            )

    def all_rows(self) -> Iterator[dict[str, Any]]:
        """Every mark as its column mapping, by id (for export)."""
        return streamed_rows(self.connection, select(marks).order_by("id"))

    def all_reinforcement_rows(self) -> Iterator[dict[str, Any]]:
        return streamed_rows(self.connection, select(reinforcements).order_by("id"))

    def restore(self, mark_rows: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]]) -> int:
        """Insert exported marks and reinforcements whose ids are not stored yet (import);
        how many marks were new."""
        dialect = self.connection.dialect.name
        new = 0
        if mark_rows:
            statement = insert_ignoring_duplicates(marks, dialect).returning(marks.c.id)
            inserted = self.connection.execute(statement, with_instants(marks, mark_rows))
            new = len(list(inserted.scalars()))
        if rows:
            self.connection.execute(
                insert_ignoring_duplicates(reinforcements, dialect),
                with_instants(reinforcements, rows),
            )
        return new

    def _move(
        self, mark_ids: Sequence[str], states: Sequence[str], state: str, now: datetime
    ) -> int:
        if not mark_ids:
            return 0
        result = self.connection.execute(
            update(marks)
            .where(marks.c.id.in_(mark_ids), marks.c.state.in_(states))
            .values(state=state, updated_at=now)
        )
        return result.rowcount
