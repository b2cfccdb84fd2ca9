"""Everything Loom reads from the store, in one place.

Loom never writes the store: what it changes, it changes through signals on the bus. Each
function here reads through the repositories of one transaction (:class:`~daemon.store.Tx`);
:class:`LoomData` runs them on the store's reader pool for one workspace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from daemon.core.records import Mark, Reinforcement, Seed, Tombstone
from daemon.store import DeliveryCounts, Found, Reinforced, Store, Tx

T = TypeVar("T")


@dataclass(frozen=True)
class MarkFilter:
    text: str = ""  # case-insensitive substring of the subject or the observation
    prefix: str = ""  # the subject starts with this (plain prefix: user.foo finds user.food)
    states: tuple[str, ...] = ()  # empty: every state
    observed_by: str = ""


@dataclass(frozen=True)
class SignalFilter:
    signal_type: str = ""
    status: str = ""  # a delivery status, or "unrouted"
    source: str = ""


@dataclass(frozen=True)
class MarkWithHistory:
    mark: Mark
    reinforcements: list[Reinforcement]
    seeds: list[Seed]  # seeds based on this mark: its promotion history
    chain: list[Mark]  # the mark and every mark linked to it by corrections, oldest first


@dataclass(frozen=True)
class Citation:
    """A mark (or one of its reinforcements) that cites lines of a daily file."""

    mark: Mark
    line_range: tuple[int, int]
    reinforced_at: datetime | None  # None: the mark's own evidence


def search_marks(
    tx: Tx, workspace: str, wanted: MarkFilter, now: datetime, limit: int
) -> tuple[list[tuple[Mark, float]], int]:
    """The ``limit`` strongest marks matching ``wanted`` with their strength at ``now``,
    and how many match in all. Every match is ranked from the few columns strength needs;
    only the winners are read in full."""
    scored = tx.marks.score_filtered(
        workspace,
        now,
        text=wanted.text,
        subject_prefix=wanted.prefix,
        states=wanted.states,
        observed_by=wanted.observed_by,
    )
    best = sorted(scored, key=lambda s: (s.value, s.last_reinforced_at, s.mark_id), reverse=True)
    best = best[:limit]
    found = tx.marks.get_many([s.mark_id for s in best])
    return [(m, s.value) for m, s in zip(found, best, strict=True)], len(scored)


def mark_with_history(tx: Tx, mark_id: str) -> MarkWithHistory | None:
    mark = tx.marks.get(mark_id)
    if mark is None:
        return None
    boosts = tx.marks.reinforcements_of([mark_id]).get(mark_id, [])
    seeds = tx.seeds.based_on(mark.workspace_id, mark_id)
    return MarkWithHistory(mark, boosts, seeds, tx.marks.chain(mark_id))


def citations_of_day(tx: Tx, workspace: str, daily_file: str) -> list[Citation]:
    """Marks whose evidence, or a reinforcement's, cites lines of ``daily_file``."""
    found = tx.marks.citing(workspace, daily_file)
    boosts = tx.marks.reinforcements_of([m.id for m in found])
    citations: list[Citation] = []
    for mark in found:
        if (lines := _cited_lines(mark.evidence, daily_file)) is not None:
            citations.append(Citation(mark, lines, None))
        for boost in boosts.get(mark.id, []):
            if (lines := _cited_lines(boost.evidence, daily_file)) is not None:
                citations.append(Citation(mark, lines, boost.reinforced_at))
    return citations


def _cited_lines(evidence: dict[str, Any], daily_file: str) -> tuple[int, int] | None:
    line_range = evidence.get("line_range")
    if evidence.get("daily_file") != daily_file or not line_range:
        return None
    return int(line_range[0]), int(line_range[1])


@dataclass(frozen=True)
class Week:
    """What happened to the memory in ``[start, end)``, each list newest first."""

    start: datetime
    end: datetime
    made: Found[Mark]
    reinforced: Found[Reinforced]
    withered: Found[Mark]
    forgotten: Found[Tombstone]
    planted: Found[Seed]
    reviewed: Found[Seed]


def week(tx: Tx, workspace: str, start: datetime, end: datetime, limit: int) -> Week:
    window = (workspace, start, end, limit)
    return Week(
        start,
        end,
        made=tx.activity.marks_made(*window),
        reinforced=tx.activity.marks_reinforced(*window),
        withered=tx.activity.marks_withered(*window),
        forgotten=tx.activity.forgotten(*window),
        planted=tx.activity.seeds_planted(*window),
        reviewed=tx.activity.seeds_reviewed(*window),
    )


def seeds_pending_first(tx: Tx, workspace: str) -> list[Seed]:
    found = tx.seeds.listing(workspace)
    return sorted(found, key=lambda s: s.state != "pending")  # stable: newest first within


def list_signals(tx: Tx, wanted: SignalFilter, limit: int) -> list[dict[str, Any]]:
    """Newest first, each with its deliveries."""
    found = tx.signals.listing(
        status=wanted.status or None,
        signal_type=wanted.signal_type or None,
        source=wanted.source or None,
        limit=limit,
    )
    return [
        {
            "id": s.id,
            "type": s.type,
            "source_id": s.source_id,
            "stored_at": s.stored_at,
            "deliveries": [
                {"receptor": d.receptor, "status": d.status, "last_error": d.last_error}
                for d in s.deliveries
            ],
        }
        for s in found
    ]


def signal_facets(tx: Tx) -> dict[str, list[str]]:
    """The signal types and sources stored, for the filter menus."""
    return {"types": tx.signals.types(), "sources": tx.signals.sources()}


class LoomData:
    """The queries above, run on the store's reader pool for one workspace."""

    def __init__(self, store: Store, workspace: str) -> None:
        self.store = store
        self.workspace = workspace

    async def _read(self, query: Callable[[Tx], T]) -> T:
        return await self.store.read(query)

    async def search_marks(
        self, wanted: MarkFilter, now: datetime, limit: int
    ) -> tuple[list[tuple[Mark, float]], int]:
        return await self._read(
            partial(search_marks, workspace=self.workspace, wanted=wanted, now=now, limit=limit)
        )

    async def observers(self) -> list[str]:
        return await self._read(lambda tx: tx.marks.observers(self.workspace))

    async def mark(self, mark_id: str) -> MarkWithHistory | None:
        found = await self._read(partial(mark_with_history, mark_id=mark_id))
        return found if found is not None and found.mark.workspace_id == self.workspace else None

    async def citations_of_day(self, daily_file: str) -> list[Citation]:
        return await self._read(
            partial(citations_of_day, workspace=self.workspace, daily_file=daily_file)
        )

    async def seeds(self) -> list[Seed]:
        return await self._read(partial(seeds_pending_first, workspace=self.workspace))

    async def seed(self, seed_id: str) -> Seed | None:
        return await self._read(lambda tx: tx.seeds.get(seed_id, self.workspace))

    async def marks(self, mark_ids: Sequence[str]) -> list[Mark]:
        return await self._read(lambda tx: tx.marks.get_many(mark_ids))

    async def signals(self, wanted: SignalFilter, limit: int) -> list[dict[str, Any]]:
        return await self._read(partial(list_signals, wanted=wanted, limit=limit))

    async def signal_facets(self) -> dict[str, list[str]]:
        return await self._read(signal_facets)

    async def signal(self, signal_id: str) -> dict[str, Any] | None:
        """The signal as the API shows it (``GET /v1/signals/{id}``)."""
        found = await self._read(lambda tx: tx.signals.get(signal_id))
        return None if found is None else found.to_json()

    async def week(self, start: datetime, end: datetime, limit: int) -> Week:
        return await self._read(
            partial(week, workspace=self.workspace, start=start, end=end, limit=limit)
        )

    async def open_delivery_counts(self) -> DeliveryCounts:
        return await self._read(lambda tx: tx.signals.open_counts())
