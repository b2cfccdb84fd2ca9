"""The store reads behind "no near-copies" and "subjects that converge".

Every query the receptors need for these lives here, so a change in the store's shape is
adapted in one place.

A new observation repeats a mark (active or withered, under the same subject) that has the
same words, case, whitespace and punctuation aside: the mark's fingerprint finds it through
an index, however long the subject's history. Failing that, it is compared with the
subject's :data:`CANDIDATES_PER_SUBJECT` most recently reinforced marks
(:func:`daemon.core.likeness.is_near_copy`), a bounded read; a threshold of 1 skips this.
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

CANDIDATES_PER_SUBJECT = 10
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
    """For each wanted observation, the mark it repeats: the oldest active or withered mark
    under the same subject with the same words (found by fingerprint, however long the
    history), else, when ``threshold`` is below 1, the oldest of the subject's recent marks
    it nearly copies; or None."""
    matched: list[str | None] = _same_words(connection, wanted)
    if threshold < 1:
        missing = [item for item, found in zip(wanted, matched, strict=True) if found is None]
        candidates = _recent(connection, missing)
        for index, item in enumerate(wanted):
            if matched[index] is None:
                matched[index] = next(
                    (
                        mark_id
                        for mark_id, text in candidates.get((item.workspace, item.subject), [])
                        if is_near_copy(item.observation, text, threshold)
                    ),
                    None,
                )
    marks = {m.id: m for m in mark_store.get_marks(connection, [i for i in matched if i])}
    return [marks.get(i) if i else None for i in matched]


def _same_words(connection: Connection, wanted: Sequence[Wanted]) -> list[str | None]:
    prints = {mark_store.fingerprint(w.subject, w.observation): w for w in wanted}
    oldest: dict[tuple[str, str], str] = {}
    keys = list(prints)
    for start in range(0, len(keys), _IN_LIST):
        rows = connection.execute(
            select(_marks.c.id, _marks.c.workspace_id, _marks.c.fingerprint)
            .where(
                _marks.c.workspace_id.in_({w.workspace for w in wanted}),
                _marks.c.fingerprint.in_(keys[start : start + _IN_LIST]),
                _marks.c.state.in_(("active", "withered")),
            )
            .order_by(_marks.c.first_observed_at, _marks.c.id)
        )
        for mark_id, workspace, fingerprint in rows:
            oldest.setdefault((workspace, fingerprint), mark_id)
    return [
        oldest.get((w.workspace, mark_store.fingerprint(w.subject, w.observation))) for w in wanted
    ]


def _recent(
    connection: Connection, wanted: Sequence[Wanted]
) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(id, text) of the recent marks under each wanted subject, oldest first."""
    by_workspace: dict[str, set[str]] = defaultdict(set)
    for item in wanted:
        by_workspace[item.workspace].add(item.subject)
    found: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for workspace, subjects in by_workspace.items():
        ordered = sorted(subjects)
        for start in range(0, len(ordered), _IN_LIST):
            parameters = {"workspace": workspace, "subjects": ordered[start : start + _IN_LIST]}
            for row in connection.execute(_candidates_query(), parameters):
                found[(workspace, row.subject)].append((row.id, row.observation))
    return found


@cache
def _candidates_query() -> Select[Any]:
    """The ids and texts of up to CANDIDATES_PER_SUBJECT of the most recently reinforced
    active or withered marks under each of some subjects of a workspace, oldest first. The
    ranking reads only narrow columns; texts are read for the winners alone."""
    ranked = (
        select(
            _marks.c.id,
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
        select(_marks.c.id, _marks.c.subject, _marks.c.observation)
        .join(ranked, ranked.c.id == _marks.c.id)
        .where(ranked.c.recency <= CANDIDATES_PER_SUBJECT)
        .order_by(_marks.c.first_observed_at, _marks.c.id)
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
