"""``memory.seed_planted``, ``memory.seed_reviewed`` and ``memory.seed_review_undone``:
proposals for the user's substrate.

A seed is stored and reviewed by a named human; it is never applied. Planting passes the
gates (status-shaped, self-referential or secret-carrying text is refused, naming the rule;
``based_on_marks`` must name standing marks). Accepting one promotes the marks it was based
on; a review can be undone within ``seeds.undo_hours``; a seed left pending longer than
``seeds.wither_days`` cannot be reviewed (it withers). Neither this receptor nor anything
else in the daemon writes the seed's target file, accepted or not."""

from __future__ import annotations

from typing import ClassVar

from daemon.bus import PayloadError, StoreReceptor
from daemon.core import signal_types
from daemon.core.records import Seed
from daemon.core.signal import Signal
from daemon.schema.payloads import SeedPlanted, SeedReviewed, SeedReviewUndone
from daemon.services.errors import Refused
from daemon.services.review import PlantingRefused, check_planting, review, undo
from daemon.store import Tx
from receptors.common import parse_payload


class SeedReceptor(StoreReceptor):
    key: ClassVar[str] = "seeds"
    binds: ClassVar[frozenset[str]] = frozenset(
        {signal_types.SEED_PLANTED, signal_types.SEED_REVIEWED, signal_types.SEED_REVIEW_UNDONE}
    )

    def __init__(self, *, wither_days: float = 30, undo_hours: float = 24) -> None:
        self.wither_days = wither_days
        self.undo_hours = undo_hours

    def apply(self, tx: Tx, signal: Signal) -> None:
        if signal.type == signal_types.SEED_PLANTED:
            self._plant(tx, signal)
            return
        try:
            if signal.type == signal_types.SEED_REVIEWED:
                reviewed = parse_payload(SeedReviewed, signal)
                review(
                    tx,
                    signal.workspace_id,
                    reviewed.seed_id,
                    reviewed.decision,
                    reviewed.reviewer,
                    signal.emitted_at,
                    self.wither_days,
                )
            else:
                undone = parse_payload(SeedReviewUndone, signal)
                undo(tx, signal.workspace_id, undone.seed_id, signal.emitted_at, self.undo_hours)
        except Refused as exc:
            raise PayloadError("seed_id", str(exc)) from None

    def _plant(self, tx: Tx, signal: Signal) -> None:
        payload = parse_payload(SeedPlanted, signal)
        try:
            check_planting(tx, signal.workspace_id, payload.proposed_change, payload.based_on_marks)
        except PlantingRefused as exc:
            raise PayloadError(exc.field, str(exc)) from None
        tx.seeds.insert(
            Seed.planted(
                signal,
                subject=payload.subject,
                proposed_change=payload.proposed_change,
                target_file=payload.target_file,
                based_on_marks=payload.based_on_marks,
            )
        )
