"""The seed-review rule, in one place: only a pending seed of the reviewer's workspace can be
accepted or rejected; accepting promotes the marks it was based on. The API checks it before
emitting a ``memory.seed_reviewed`` signal (to answer 404/409 at once); the seeds receptor
applies it when the signal is delivered."""

from __future__ import annotations

from datetime import datetime

from daemon.core.records import Seed
from daemon.store import Tx


class ReviewRefused(ValueError):
    """The review cannot be applied; ``status`` is the HTTP status that says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def reviewable(tx: Tx, workspace: str, seed_id: str) -> Seed:
    """The seed, if it can be reviewed now; otherwise :class:`ReviewRefused`."""
    seed = tx.seeds.get(seed_id, workspace)
    if seed is None:
        raise ReviewRefused(404, f"no seed {seed_id}")
    if seed.state != "pending":
        raise ReviewRefused(409, f"seed {seed_id} is already {seed.state}")
    return seed


def review(
    tx: Tx, workspace: str, seed_id: str, decision: str, reviewer: str, at: datetime
) -> Seed:
    """Apply a review in ``tx``; the seed as it was before. Raises :class:`ReviewRefused`."""
    seed = reviewable(tx, workspace, seed_id)
    if not tx.seeds.review(seed.id, decision, reviewer, at):
        raise ReviewRefused(409, f"seed {seed_id} was reviewed meanwhile")
    if decision == "accepted":
        tx.marks.set_state(seed.based_on_marks, "promoted", at)
    return seed
