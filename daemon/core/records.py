"""The memory's records as the code handles them: plain frozen dataclasses, with
constructors that say what made them (``Mark.observed``, ``Reinforcement.of``,
``Seed.planted``) so no caller spells out every field.

The SQL tables are defined with SQLModel in ``daemon/store/tables.py``; the repositories
hand back these records, which cost a fraction of an instrumented ORM object (recall builds
hundreds of them per call)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar, Self

from daemon.core.signal import Signal

# new_signal_id's layout: a 48-bit millisecond, version 7, then random bits (and variant).
_UUID7 = re.compile(r"[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}")


class _Record:
    """Conversion to and from the column mapping of a row."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Any]]

    @classmethod
    def from_row(cls, mapping: Any) -> Self:
        return cls(**{name: mapping[name] for name in cls.__dataclass_fields__})

    def to_row(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True, slots=True, kw_only=True)
class Mark(_Record):
    """A typed, timestamped, evidence-linked observation about a dot-path subject."""

    id: str
    workspace_id: str
    subject: str
    observation: str
    evidence: dict[str, Any]
    initial_strength: float
    half_life_days: float  # 0 = no decay
    observed_by: str
    first_observed_at: datetime
    last_reinforced_at: datetime
    reinforcement_count: int = 0
    affinity: list[str] = field(default_factory=list)
    substrate_refs: list[str] = field(default_factory=list)
    state: str = "active"  # see MARK_STATES
    supersedes: str | None = None  # the mark this one corrects
    superseded_by: str | None = None  # the mark that corrects this one
    ended_at: datetime | None = None  # when it was superseded, retracted or forgotten
    ended_reason: str | None = None
    # stated (a human said it) | observed (an agent saw it) | inferred (an extractor or
    # agent concluded it)
    provenance: str = "observed"
    created_at: datetime
    updated_at: datetime

    @property
    def current(self) -> bool:
        """Whether the mark still stands (it was not superseded, retracted or forgotten)."""
        return self.state in CURRENT_MARK_STATES

    @staticmethod
    def id_for_signal(signal_id: str) -> str:
        """The id of the mark an observation signal creates (when it creates one).

        For a signal id laid out as a UUIDv7 (the daemon's own), the 24 hex digits begin
        with the id's 12 of its millisecond, then 12 of the digest: marks made in time order land
        next to each other in the marks' id index, so a commit of many touches one index
        page instead of one page each. Any other id: the digest's first 24 (as for every
        mark made before this layout, :meth:`ids_for_signal`)."""
        if _UUID7.fullmatch(signal_id):
            return f"mk_{signal_id[:12]}{derived_id('mk', signal_id)[3:15]}"
        return derived_id("mk", signal_id)

    @staticmethod
    def ids_for_signal(signal_id: str) -> tuple[str, ...]:
        """Each id the mark an observation signal created may have: :meth:`id_for_signal`,
        and for a UUIDv7 also the digest alone: the id of a mark made before marks' ids were
        laid out in time order."""
        current, whole = Mark.id_for_signal(signal_id), derived_id("mk", signal_id)
        return (current,) if current == whole else (current, whole)

    @classmethod
    def observed(
        cls,
        signal: Signal,
        *,
        id: str,
        subject: str,
        observation: str,
        evidence: dict[str, Any],
        initial_strength: float,
        half_life_days: float,
        affinity: Sequence[str] = (),
        substrate_refs: Sequence[str] = (),
        provenance: str = "observed",
        at: datetime | None = None,
    ) -> Mark:
        """A new, active mark made from ``signal``: its workspace, its emitter as the observer
        and the time of its evidence (``at``, else the signal's instant) as the moment of
        observation; made when the signal was emitted. ``id`` is derived from what made it
        (:func:`derived_id`; one signal's observation: :meth:`id_for_signal`)."""
        observed_at = at or signal.emitted_at
        return cls(
            id=id,
            workspace_id=signal.workspace_id,
            subject=subject,
            observation=observation,
            evidence=evidence,
            initial_strength=min(1.0, max(0.0, initial_strength)),
            half_life_days=half_life_days,
            observed_by=signal.source_id,
            first_observed_at=observed_at,
            last_reinforced_at=observed_at,
            affinity=list(affinity),
            substrate_refs=list(substrate_refs),
            provenance=provenance,
            created_at=signal.emitted_at,
            updated_at=signal.emitted_at,
        )

    def corrected(self, signal: Signal, *, text: str, reason: str) -> Mark:
        """The mark that replaces this one with ``text``: same subject, strength settings and
        references, observed anew by ``signal``'s emitter, linked back to this one."""
        new = Mark.observed(
            signal,
            id=Mark.id_for_signal(signal.id),
            subject=self.subject,
            observation=text,
            evidence={"signal_ids": [signal.id], "note": f"correction: {reason}"},
            initial_strength=self.initial_strength,
            half_life_days=self.half_life_days,
            affinity=self.affinity,
            substrate_refs=self.substrate_refs,
        )
        return replace(new, supersedes=self.id)


# States in which a mark still stands; recall shows only these unless asked for history.
CURRENT_MARK_STATES = ("active", "withered", "promoted")
ENDED_MARK_STATES = ("superseded", "retracted", "forgotten")
MARK_STATES = CURRENT_MARK_STATES + ENDED_MARK_STATES


@dataclass(frozen=True, slots=True, kw_only=True)
class Reinforcement(_Record):
    id: str
    mark_id: str
    reinforced_at: datetime
    reinforced_by: str
    evidence: dict[str, Any]
    strength_delta: float

    @staticmethod
    def id_for_signal(signal_id: str) -> str:
        """The id of the reinforcement an observation signal makes (when it makes one)."""
        return derived_id("rf", signal_id)

    @classmethod
    def of(
        cls,
        mark: Mark,
        signal: Signal,
        *,
        evidence: dict[str, Any],
        delta: float,
        id: str | None = None,
        at: datetime | None = None,
    ) -> Self:
        """``signal`` said again what ``mark`` says, at the time of its evidence (``at``,
        else the signal's instant): one reinforcement per signal (unless ``id`` names
        another origin, as one extraction of many in a consolidation)."""
        return cls(
            id=id or cls.id_for_signal(signal.id),
            mark_id=mark.id,
            reinforced_at=at or signal.emitted_at,
            reinforced_by=signal.source_id,
            evidence=evidence,
            strength_delta=delta,
        )


def in_evidence_order(
    boosts: Sequence[tuple[Mark, Reinforcement]],
) -> tuple[list[tuple[Mark, Reinforcement]], list[Mark]]:
    """Reinforcements (of marks as stored) put in the order of their evidence.

    Evidence arrives in any order (an old journal consolidated today). A reinforcement dated
    before its mark's first observation trades places with it: the mark is first observed
    by the earlier evidence (its time, observer and evidence), and the reinforcement records
    the later one. So ``first_observed_at`` is always the earliest evidence, the initial
    strength decays from it and each delta from a later piece of evidence: the strength
    does not depend on the order the evidence came in. Returns the reinforcements to record
    and the marks whose first observation moved back, as they are now to be stored."""
    moved: dict[str, Mark] = {}
    ordered: list[tuple[Mark, Reinforcement]] = []
    for stored, boost in boosts:
        mark = moved.get(stored.id, stored)
        if boost.reinforced_at < mark.first_observed_at:
            mark, boost = (
                replace(
                    mark,
                    first_observed_at=boost.reinforced_at,
                    observed_by=boost.reinforced_by,
                    evidence=boost.evidence,
                ),
                replace(
                    boost,
                    reinforced_at=mark.first_observed_at,
                    reinforced_by=mark.observed_by,
                    evidence=mark.evidence,
                ),
            )
            moved[mark.id] = mark
        ordered.append((mark, boost))
    return ordered, list(moved.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class Seed(_Record):
    """A proposal that the user add something to a substrate file. Never applied here.
    This is the stored record; the API shows it as :class:`daemon.schema.answers.SeedItem`."""

    id: str
    workspace_id: str
    subject: str
    proposed_change: str
    target_file: str
    based_on_marks: list[str]
    planted_at: datetime
    planted_by: str
    state: str = "pending"  # pending | accepted | rejected | withered
    reviewed_at: datetime | None = None
    reviewed_by: str | None = None
    withered_at: datetime | None = None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def planted(
        cls,
        signal: Signal,
        *,
        subject: str,
        proposed_change: str,
        target_file: str,
        based_on_marks: Sequence[str],
    ) -> Self:
        """A pending seed proposed by ``signal``'s emitter."""
        return cls(
            id=derived_id("sd", signal.id),
            workspace_id=signal.workspace_id,
            subject=subject,
            proposed_change=proposed_change,
            target_file=target_file,
            based_on_marks=list(based_on_marks),
            planted_at=signal.emitted_at,
            planted_by=signal.source_id,
            created_at=signal.emitted_at,
            updated_at=signal.emitted_at,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Tombstone(_Record):
    """What a ``memory.forget`` erased: who, when, why and how many; never the text."""

    id: str
    workspace_id: str
    target: str  # the subject prefix or the mark id
    target_kind: str  # subject | mark
    forgotten_by: str
    forgotten_at: datetime
    reason: str
    marks_erased: int
    signals_erased: int
    signal_id: str


def derived_id(kind: str, *parts: str) -> str:
    """A stable id from what made a record, so redelivery finds it instead of duplicating."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]
    return f"{kind}_{digest}"
