"""``memory.observation`` → a mark, or a reinforcement of the same mark.

The mark's strength starts at the signal's intensity and halves every ``decay_rate`` seconds
of the signal (the mark's ``half_life_days``). The same normalized subject and observation
text seen again, while the mark is active or withered, reinforces it (reviving a withered
one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import model_validator

from daemon.bus import PayloadError, StoppedAt, StoreReceptor
from daemon.core.clock import SECONDS_PER_DAY
from daemon.core.records import Mark, Reinforcement
from daemon.core.signal import Signal
from daemon.store import Tx
from daemon.store.marks import ObservationKey
from receptors.common import (
    DayFile,
    LineRange,
    Name,
    Payload,
    Subject,
    SubstrateRef,
    Tags,
    Text,
    parse_payload,
)


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

    def apply(self, tx: Tx, signal: Signal) -> None:
        try:
            self.apply_batch(tx, [signal])
        except StoppedAt as stop:
            raise stop.error from None

    def apply_batch(self, tx: Tx, signals: Sequence[Signal]) -> None:
        observed = []
        for index, signal in enumerate(signals):
            try:
                observed.append((signal, parse_payload(Observation, signal.payload)))
            except PayloadError as exc:
                raise StoppedAt(index, exc) from exc
        marks = tx.marks.same_observations(_key(signal, payload) for signal, payload in observed)
        new: list[Mark] = []
        boosts: list[tuple[Mark, Reinforcement]] = []
        for signal, payload in observed:
            evidence = payload.evidence.model_dump(exclude_defaults=True)
            evidence["signal_ids"] = [*payload.evidence.signal_ids, signal.id]
            key = _key(signal, payload)
            existing = marks.get(key)
            if existing is None:
                marks[key] = Mark.observed(
                    signal,
                    id=Mark.id_for_signal(signal.id),
                    subject=payload.subject,
                    observation=payload.observation,
                    evidence=evidence,
                    initial_strength=signal.intensity,
                    half_life_days=signal.decay_rate / SECONDS_PER_DAY,
                    affinity=payload.affinity if payload.affinity is not None else signal.affinity,
                    substrate_refs=payload.substrate_refs,
                )
                new.append(marks[key])
            else:
                boosts.append(
                    (
                        existing,
                        Reinforcement.of(
                            existing, signal, evidence=evidence, delta=self.reinforce_delta
                        ),
                    )
                )
        tx.marks.insert(new)  # first: a boost may be for a new mark
        tx.marks.reinforce(boosts)


def _key(signal: Signal, payload: Observation) -> ObservationKey:
    return (signal.workspace_id, payload.subject, payload.observation)
