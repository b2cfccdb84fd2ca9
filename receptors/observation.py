"""``memory.observation`` → a mark, or a reinforcement of the same mark.

The mark's strength starts at the signal's intensity and halves every ``decay_rate``
(seconds on the signal, days on the mark). The same normalized subject and observation text
seen again, while the mark is active or withered, reinforces it (reviving a withered one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import model_validator
from sqlalchemy.engine import Connection

from daemon.bus import PayloadError, StoppedAt, StoreReceptor
from daemon.core.records import Mark, Reinforcement
from daemon.core.signal import Signal
from daemon.store import marks as mark_store
from receptors.common import (
    DayFile,
    LineRange,
    Name,
    Payload,
    Subject,
    SubstrateRef,
    Tags,
    Text,
    derived_id,
    parse_payload,
)

SECONDS_PER_DAY = 86_400.0


class Evidence(Payload):
    signal_ids: list[Name] = []
    daily_file: DayFile | None = None
    line_range: LineRange | None = None
    compost_ids: list[Name] = []
    note: Text | None = None

    @model_validator(mode="after")
    def _something_populated(self) -> Evidence:
        if not (
            self.signal_ids or self.daily_file or self.line_range or self.compost_ids or self.note
        ):
            raise ValueError(
                "needs at least one of signal_ids, daily_file, line_range, compost_ids, note"
            )
        return self


class Observation(Payload):
    subject: Subject
    observation: Text
    evidence: Evidence
    affinity: Tags | None = None
    substrate_refs: list[SubstrateRef] = []


class ObservationReceptor(StoreReceptor):
    key: ClassVar[str] = "observation"
    binds: ClassVar[frozenset[str]] = frozenset({"memory.observation"})

    def __init__(self, reinforce_delta: float = 0.2) -> None:
        self.reinforce_delta = reinforce_delta

    def apply(self, connection: Connection, signal: Signal) -> None:
        try:
            self.apply_batch(connection, [signal])
        except StoppedAt as stop:
            raise stop.error from None

    def apply_batch(self, connection: Connection, signals: Sequence[Signal]) -> None:
        observed = []
        for index, signal in enumerate(signals):
            try:
                observed.append((signal, parse_payload(Observation, signal.payload)))
            except PayloadError as exc:
                raise StoppedAt(index, exc) from exc
        marks = mark_store.find_same_observations(
            connection, (_key(signal, payload) for signal, payload in observed)
        )
        new: list[Mark] = []
        boosts: list[tuple[Mark, Reinforcement]] = []
        for signal, payload in observed:
            evidence = payload.evidence.model_dump(exclude_defaults=True)
            evidence["signal_ids"] = [*payload.evidence.signal_ids, signal.id]
            key = _key(signal, payload)
            existing = marks.get(key)
            if existing is None:
                marks[key] = self._mark(signal, payload, evidence)
                new.append(marks[key])
            else:
                boosts.append((existing, self._reinforcement(signal, existing, evidence)))
        mark_store.insert_marks(connection, new)  # first: a boost may be for a new mark
        mark_store.reinforce_many(connection, boosts)

    def _mark(self, signal: Signal, payload: Observation, evidence: dict[str, Any]) -> Mark:
        return Mark(
            id=derived_id("mk", signal.id),
            workspace_id=signal.workspace_id or "default",
            subject=payload.subject,
            observation=payload.observation,
            evidence=evidence,
            initial_strength=signal.intensity,
            decay_rate=signal.decay_rate / SECONDS_PER_DAY,
            observed_by=signal.source_id,
            first_observed_at=signal.emitted_at,
            last_reinforced_at=signal.emitted_at,
            reinforcement_count=0,
            affinity=list(payload.affinity if payload.affinity is not None else signal.affinity),
            substrate_refs=list(payload.substrate_refs),
            state="active",
            created_at=signal.emitted_at,
            updated_at=signal.emitted_at,
        )

    def _reinforcement(self, signal: Signal, mark: Mark, evidence: dict[str, Any]) -> Reinforcement:
        return Reinforcement(
            id=derived_id("rf", signal.id),
            mark_id=mark.id,
            reinforced_at=signal.emitted_at,
            reinforced_by=signal.source_id,
            evidence=evidence,
            strength_delta=self.reinforce_delta,
        )


def _key(signal: Signal, payload: Observation) -> mark_store.ObservationKey:
    return (signal.workspace_id or "default", payload.subject, payload.observation)
