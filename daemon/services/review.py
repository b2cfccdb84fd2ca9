"""The seed rules, in one place: what may be planted, who may review, undo and wither.

- Planting: the proposed text passes the gates (:mod:`daemon.core.seed_gates`) and every
  ``based_on_marks`` id names a standing mark of the workspace.
- Review: only a pending seed of the reviewer's workspace, not yet withered, can be accepted
  or rejected; accepting promotes the marks it was based on.
- Undo: within ``undo_hours`` of its review, an accepted or rejected seed is pending again
  (an accepted one's marks are no longer promoted).
- Withering: a pending seed not reviewed within ``wither_days`` withers.

The command path (:mod:`daemon.services.commands`) checks these before emitting a signal (to
refuse at once); the seeds receptor applies them when the signal is delivered. Refusals are
the domain's (:mod:`daemon.services.errors`): NotFound or Conflict."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from daemon.core.records import Seed
from daemon.core.seed_gates import seed_refusal
from daemon.services.errors import Conflict, NotFound
from daemon.store import Tx


class PlantingRefused(ValueError):
    """The seed may not be planted; ``field`` names the payload field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def check_planting(tx: Tx, workspace: str, proposed_change: str, based_on: Sequence[str]) -> None:
    """Raise :class:`PlantingRefused` naming the rule, or return when the seed may be planted."""
    refusal = seed_refusal(proposed_change)
    if refusal is not None:
        raise PlantingRefused("proposed_change", str(refusal))
    found = {m.id: m for m in tx.marks.get_many(list(based_on))}
    for index, mark_id in enumerate(based_on):
        mark = found.get(mark_id)
        if mark is None or mark.workspace_id != workspace:
            raise PlantingRefused(f"based_on_marks.{index}", f"no mark {mark_id} in this workspace")
        if not mark.current:
            raise PlantingRefused(f"based_on_marks.{index}", f"mark {mark_id} is {mark.state}")


def overdue(seed: Seed, now: datetime, wither_days: float) -> bool:
    return seed.state == "pending" and now - seed.planted_at > timedelta(days=wither_days)


def reviewable(tx: Tx, workspace: str, seed_id: str, now: datetime, wither_days: float) -> Seed:
    """The seed, if it can be reviewed now; else NotFound or Conflict."""
    seed = tx.seeds.get(seed_id, workspace)
    if seed is None:
        raise NotFound(f"no seed {seed_id}", field="seed_id")
    if overdue(seed, now, wither_days):
        raise Conflict(
            f"seed {seed_id} withered: not reviewed within {wither_days:g} days of planting",
            field="seed_id",
        )
    if seed.state != "pending":
        raise Conflict(f"seed {seed_id} is already {seed.state}", field="seed_id")
    return seed


def review(
    tx: Tx,
    workspace: str,
    seed_id: str,
    decision: str,
    reviewer: str,
    at: datetime,
    wither_days: float,
) -> Seed:
    """Apply a review in ``tx``; the seed as it was before."""
    seed = reviewable(tx, workspace, seed_id, at, wither_days)
    if not tx.seeds.review(seed.id, decision, reviewer, at):
        raise Conflict(f"seed {seed_id} was reviewed meanwhile", field="seed_id")
    if decision == "accepted":
        tx.marks.promote(seed.based_on_marks, at)
    return seed


def undoable(tx: Tx, workspace: str, seed_id: str, now: datetime, undo_hours: float) -> Seed:
    """The seed, if its review can be undone now; else NotFound or Conflict."""
    seed = tx.seeds.get(seed_id, workspace)
    if seed is None:
        raise NotFound(f"no seed {seed_id}", field="seed_id")
    if seed.state not in ("accepted", "rejected") or seed.reviewed_at is None:
        raise Conflict(
            f"seed {seed_id} is {seed.state}: there is no review to undo", field="seed_id"
        )
    if now - seed.reviewed_at > timedelta(hours=undo_hours):
        raise Conflict(
            f"seed {seed_id} was {seed.state} more than {undo_hours:g} hours ago: "
            "the review can no longer be undone",
            field="seed_id",
        )
    return seed


def undo(tx: Tx, workspace: str, seed_id: str, at: datetime, undo_hours: float) -> Seed:
    """Make a reviewed seed pending again; the seed as it was."""
    seed = undoable(tx, workspace, seed_id, at, undo_hours)
    if not tx.seeds.undo_review(seed.id, at):
        raise Conflict(f"seed {seed_id} was changed meanwhile", field="seed_id")
    if seed.state == "accepted":
        tx.marks.unpromote(seed.based_on_marks, at)
    return seed


def wither(tx: Tx, workspace: str, now: datetime, wither_days: float) -> int:
    """Pending seeds older than ``wither_days`` wither; how many did."""
    return tx.seeds.wither(workspace, now - timedelta(days=wither_days), now)
