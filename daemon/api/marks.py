"""``/v1/marks/{id}`` and ``/v1/changes``: one mark with its evidence and history, and what
changed in the memory since an instant (marks made, reinforced and ended; seeds planted and
reviewed). Reads only; for an agent to check what it did and what others did."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Query

from daemon.api.deps import Problem, Running
from daemon.core.clock import iso, to_utc
from daemon.core.records import CURRENT_MARK_STATES, ENDED_MARK_STATES, Mark, Reinforcement, Seed
from daemon.core.signal import EARLIEST_EMITTED_AT
from daemon.store import Tx

router = APIRouter(tags=["marks"])

MAX_CHANGES = 500  # of each kind; the newest are kept
Since = Query(description="An ISO instant with its offset (2026-03-01T09:00:00Z)")


def _json(record: Mark | Reinforcement | Seed) -> dict[str, Any]:
    return {k: iso(v) if isinstance(v, datetime) else v for k, v in record.to_row().items()}


@router.get("/v1/marks/{mark_id}", summary="A mark with its evidence, reinforcements, corrections")
async def mark(mark_id: str, services: Running) -> dict[str, Any]:
    workspace = services.memory.workspace

    def read(tx: Tx) -> dict[str, Any] | None:
        found = tx.marks.get(mark_id)
        if found is None or found.workspace_id != workspace:
            return None
        boosts = tx.marks.reinforcements_of([mark_id]).get(mark_id, [])
        return {
            "mark": _json(found),
            "reinforcements": [_json(b) for b in boosts],
            # Oldest first: the marks it corrected and the ones that corrected it.
            "corrections": [_json(m) for m in tx.marks.chain(mark_id) if m.id != mark_id],
        }

    answer = await services.bus.store.read(read)
    if answer is None:
        raise Problem(404, f"no mark {mark_id}")
    return answer


@router.get("/v1/changes", summary="What changed since an instant: marks and seeds")
async def changes(
    services: Running,
    since: datetime = Since,
) -> dict[str, Any]:
    if since.tzinfo is None:
        raise Problem(422, "since: must carry its UTC offset (…Z or +01:00)")
    try:
        # Nothing is dated before EARLIEST_EMITTED_AT: an earlier instant asks for everything
        # (and leaves room for the second subtracted below).
        start = max(to_utc(since), EARLIEST_EMITTED_AT)
    except ValueError as exc:  # 0001-01-01T00:04+01:00 has no instant in UTC
        raise Problem(422, f"since: {exc}") from None
    workspace = services.memory.workspace

    def read(tx: Tx) -> dict[str, Any]:
        # A second early, then exact: SQLite compares instants as text, and one stored
        # without a fraction sorts before the same instant bound with one.
        early = start - timedelta(seconds=1)
        states = CURRENT_MARK_STATES + ENDED_MARK_STATES
        touched = [
            m for m in tx.marks.find(workspace, "", states, early) if m.last_reinforced_at >= start
        ]
        made = [m for m in touched if m.created_at >= start]
        boosts = tx.marks.reinforcements_of([m.id for m in touched])
        reinforced = [
            {"mark_id": r.mark_id, "reinforced_at": iso(r.reinforced_at), "by": r.reinforced_by}
            for rows in boosts.values()
            for r in rows
            if r.reinforced_at >= start
        ]
        ended = [
            m
            for m in tx.marks.find(workspace, "", ENDED_MARK_STATES)
            if m.ended_at is not None and m.ended_at >= start
        ]
        seeds = tx.seeds.listing(workspace)
        return {
            "since": iso(start),
            "marks_made": _newest([_json(m) for m in made], "created_at"),
            "marks_reinforced": _newest(reinforced, "reinforced_at"),
            "marks_ended": _newest([_json(m) for m in ended], "ended_at"),
            "seeds_planted": _newest(
                [_json(s) for s in seeds if s.planted_at >= start], "planted_at"
            ),
            "seeds_reviewed": _newest(
                [_json(s) for s in seeds if s.reviewed_at and s.reviewed_at >= start],
                "reviewed_at",
            ),
        }

    return await services.bus.store.read(read)


def _newest(items: list[dict[str, Any]], when: str) -> list[dict[str, Any]]:
    return sorted(items, key=lambda item: item[when], reverse=True)[:MAX_CHANGES]
