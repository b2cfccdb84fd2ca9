"""``memory.seed_planted`` and ``memory.seed_reviewed``: proposals for the user's substrate.

A seed is stored and reviewed by a named human; it is never applied. Accepting one promotes
the marks it was based on. Neither this receptor nor anything else in the daemon writes the
seed's target file, accepted or not."""

from __future__ import annotations

from typing import ClassVar, Literal

from sqlalchemy.engine import Connection

from daemon.bus import PayloadError, StoreReceptor
from daemon.core.records import Seed
from daemon.core.signal import Signal
from daemon.store import marks as mark_store
from daemon.store import seeds as seed_store
from receptors.common import Name, Payload, Subject, TargetFile, Text, derived_id, parse_payload


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

    def apply(self, connection: Connection, signal: Signal) -> None:
        if signal.type == "memory.seed_planted":
            self._plant(connection, signal)
        else:
            self._review(connection, signal)

    def _plant(self, connection: Connection, signal: Signal) -> None:
        payload = parse_payload(SeedPlanted, signal.payload)
        seed_store.insert_seed(
            connection,
            Seed(
                id=derived_id("sd", signal.id),
                workspace_id=signal.workspace_id or "default",
                subject=payload.subject,
                proposed_change=payload.proposed_change,
                target_file=payload.target_file,
                based_on_marks=list(payload.based_on_marks),
                planted_at=signal.emitted_at,
                planted_by=signal.source_id,
                state="pending",
                created_at=signal.emitted_at,
                updated_at=signal.emitted_at,
            ),
        )

    def _review(self, connection: Connection, signal: Signal) -> None:
        payload = parse_payload(SeedReviewed, signal.payload)
        seed = seed_store.get_seed(connection, payload.seed_id)
        if seed is None or seed.workspace_id != (signal.workspace_id or "default"):
            raise PayloadError("seed_id", f"no seed {payload.seed_id}")
        if seed.state != "pending":
            raise PayloadError("seed_id", f"seed {seed.id} is already {seed.state}")
        seed_store.review_seed(
            connection, seed.id, payload.decision, payload.reviewer, signal.emitted_at
        )
        if payload.decision == "accepted":
            mark_store.set_state(connection, seed.based_on_marks, "promoted", signal.emitted_at)
