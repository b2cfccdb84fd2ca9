"""The store reads behind "no near-copies" and "subjects that converge".

Every query the receptors need for these lives here, so a change in the store's shape is
adapted in one place.

A new observation is compared with the marks already under its subject (active or
withered, the most recently reinforced :data:`CANDIDATES_PER_SUBJECT` of them, so a subject
with a long history costs a bounded read); the oldest one it nearly copies
(:func:`daemon.core.likeness.is_near_copy`) is the mark it reinforces.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.engine import Connection

from daemon.core.likeness import is_near_copy
from daemon.core.records import Mark
from daemon.store import marks as mark_store

CANDIDATES_PER_SUBJECT = 200
_IN_LIST = 500  # bounded IN lists

_marks = mark_store.marks


@dataclass(frozen=True, slots=True)
class Wanted:
    workspace: str
    subject: str  # normalized
    observation: str


def near_copies(
    connection: Connection, wanted: Sequence[Wanted], threshold: float
) -> list[Mark | None]:
    """For each wanted observation, the oldest active or withered mark under the same
    subject that it nearly copies, or None."""
    by_workspace: dict[str, set[str]] = defaultdict(set)
    for item in wanted:
        by_workspace[item.workspace].add(item.subject)
    candidates: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for workspace, subjects in by_workspace.items():
        ordered = sorted(subjects)
        for start in range(0, len(ordered), _IN_LIST):
            parameters = {"workspace": workspace, "subjects": ordered[start : start + _IN_LIST]}
            for row in connection.execute(_candidates_query(), parameters):
                candidates[(workspace, row.subject)].append((row.id, row.observation))
    matched: list[str | None] = []
    for item in wanted:
        found = candidates.get((item.workspace, item.subject), [])
        matched.append(
            next((i for i, text in found if is_near_copy(item.observation, text, threshold)), None)
        )
    marks = {m.id: m for m in mark_store.get_marks(connection, [i for i in matched if i])}
    return [marks.get(i) if i else None for i in matched]


@cache
def _candidates_query() -> Select[Any]:
    """Up to CANDIDATES_PER_SUBJECT of the most recently reinforced active or withered
    marks under each of some subjects of a workspace, oldest first."""
    recent = (
        select(
            _marks.c.id,
            _marks.c.subject,
            _marks.c.observation,
            _marks.c.first_observed_at,
            func.row_number()
            .over(partition_by=_marks.c.subject, order_by=_marks.c.last_reinforced_at.desc())
            .label("recency"),
        )
        .where(
            _marks.c.workspace_id == bindparam("workspace"),
            _marks.c.subject.in_(bindparam("subjects", expanding=True)),
            _marks.c.state.in_(("active", "withered")),
        )
        .subquery()
    )
    return (
        select(recent.c.id, recent.c.subject, recent.c.observation)
        .where(recent.c.recency <= CANDIDATES_PER_SUBJECT)
        .order_by(recent.c.first_observed_at, recent.c.id)
    )


def known_subjects(connection: Connection, workspace: str) -> list[str]:
    """Every subject the workspace's live memory uses (active, withered or promoted)."""
    return list(
        connection.execute(
            select(_marks.c.subject)
            .distinct()
            .where(
                _marks.c.workspace_id == workspace,
                _marks.c.state.in_(mark_store.MARK_STATES),
            )
            .order_by(_marks.c.subject)
        ).scalars()
    )
