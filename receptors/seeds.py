"""``memory.seed_planted`` and ``memory.seed_reviewed``: proposals for the user's substrate.

A seed is stored and reviewed by a named human; it is never applied. Accepting one promotes
the marks it was based on. Neither this receptor nor anything else in the daemon writes the
seed's target file, accepted or not."""

from __future__ import annotations

from typing import ClassVar, Literal

from daemon.bus import PayloadError, StoreReceptor
from daemon.core.records import Seed
from daemon.core.signal import Signal
from daemon.services.review import ReviewRefused, review
from daemon.store import Tx
from receptors.common import Name, Payload, Subject, TargetFile, Text, parse_payload


class SeedPlanted(Payload):
    subject: Subject
    proposed_change: Text
    target_file: TargetFile
    based_on_marks: list[Name] = []


class SeedReviewed(Payload):
    seed_id: Name
    decision: Literal["accepted", "rejected"]
    reviewer: Name


class SeedReceptor(StoreReceptor):
    key: ClassVar[str] = "seeds"
    binds: ClassVar[frozenset[str]] = frozenset({"memory.seed_planted", "memory.seed_reviewed"})

    def apply(self, tx: Tx, signal: Signal) -> None:
        if signal.type == "memory.seed_planted":
            payload = parse_payload(SeedPlanted, signal.payload)
            tx.seeds.insert(
                Seed.planted(
                    signal,
                    subject=payload.subject,
                    proposed_change=payload.proposed_change,
                    target_file=payload.target_file,
                    based_on_marks=payload.based_on_marks,
                )
            )
            return
        reviewed = parse_payload(SeedReviewed, signal.payload)
        try:
            review(
                tx,
                signal.workspace_id,
                reviewed.seed_id,
                reviewed.decision,
                reviewed.reviewer,
                signal.emitted_at,
            )
        except ReviewRefused as exc:
            raise PayloadError("seed_id", str(exc)) from None
