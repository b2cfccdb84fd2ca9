"""``memory.observation`` → a mark, or a reinforcement of the same mark.

Both are dated by their evidence: the payload's ``observed_at`` when the emitter knows when
it was seen or said (:data:`~daemon.schema.fields.EvidenceInstant`), else the signal's
``emitted_at``. Evidence older than the mark's first observation moves that back
(:func:`~daemon.core.records.in_evidence_order`).

The mark's strength starts at the signal's intensity and halves every ``decay_rate``
seconds of the signal (the mark's ``half_life_days``). An observation under the same normalized
subject that nearly copies the text of a mark that still stands (case, whitespace and
punctuation aside, words overlapping at least ``[observation] similarity``) reinforces that
mark instead: a withered one is revived, a promoted one stays promoted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from daemon.bus import PayloadError, StoppedAt, StoreReceptor
from daemon.core import signal_types
from daemon.core.clock import SECONDS_PER_DAY
from daemon.core.likeness import DEFAULT_SIMILARITY, is_near_copy
from daemon.core.records import Mark, Reinforcement
from daemon.core.signal import Signal
from daemon.schema.payloads import Observation
from daemon.store import Tx
from receptors.common import parse_payload
from receptors.near_copies import Wanted, near_copies


class ObservationReceptor(StoreReceptor):
    key: ClassVar[str] = "observation"
    binds: ClassVar[frozenset[str]] = frozenset({signal_types.OBSERVATION})

    def __init__(
        self, reinforce_delta: float = 0.2, similarity: float = DEFAULT_SIMILARITY
    ) -> None:
        self.reinforce_delta = reinforce_delta
        self.similarity = similarity

    def apply(self, tx: Tx, signal: Signal) -> None:
        try:
            self.apply_batch(tx, [signal])
        except StoppedAt as stop:
            raise stop.error from None

    def apply_batch(self, tx: Tx, signals: Sequence[Signal]) -> None:
        observed = []
        for index, signal in enumerate(signals):
            try:
                observed.append((signal, parse_payload(Observation, signal)))
            except PayloadError as exc:
                raise StoppedAt(index, exc) from exc
        stored = near_copies(
            tx,
            [Wanted(signal.workspace_id, p.subject, p.observation) for signal, p in observed],
            self.similarity,
        )
        new: list[Mark] = []
        boosts: list[tuple[Mark, Reinforcement]] = []
        for (signal, payload), existing in zip(observed, stored, strict=True):
            evidence = payload.evidence.model_dump(exclude_defaults=True)
            evidence["signal_ids"] = [*payload.evidence.signal_ids, signal.id]
            # A mark made earlier in this batch is older than none stored, but counts too.
            existing = existing or next(
                (m for m in new if self._same(m, signal.workspace_id, payload)), None
            )
            at = payload.observed_at or signal.emitted_at
            if existing is None:
                new.append(
                    Mark.observed(
                        signal,
                        id=Mark.id_for_signal(signal.id),
                        subject=payload.subject,
                        observation=payload.observation,
                        evidence=evidence,
                        initial_strength=signal.intensity,
                        half_life_days=signal.decay_rate / SECONDS_PER_DAY,
                        affinity=(
                            payload.affinity if payload.affinity is not None else signal.affinity
                        ),
                        substrate_refs=payload.substrate_refs,
                        provenance=payload.provenance,
                        at=at,
                    )
                )
            else:
                boost = Reinforcement.of(
                    existing, signal, evidence=evidence, delta=self.reinforce_delta, at=at
                )
                boosts.append((existing, boost))
        tx.marks.insert(new)  # first: a boost may be for a new mark
        tx.marks.reinforce(boosts)

    def _same(self, mark: Mark, workspace: str, payload: Observation) -> bool:
        return (
            mark.workspace_id == workspace
            and mark.subject == payload.subject
            and is_near_copy(mark.observation, payload.observation, self.similarity)
        )
