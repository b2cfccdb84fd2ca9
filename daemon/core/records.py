"""The memory's records as the code handles them: plain frozen dataclasses.

The SQL tables are defined with SQLModel in :mod:`daemon.store.tables`; queries use
SQLAlchemy Core and hand back these records, which cost a fraction of an instrumented ORM
object (recall builds hundreds of them per call)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Self


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
    decay_rate: float  # half-life in days; 0 = no decay
    observed_by: str
    first_observed_at: datetime
    last_reinforced_at: datetime
    reinforcement_count: int = 0
    affinity: list[str] = field(default_factory=list)
    substrate_refs: list[str] = field(default_factory=list)
    state: str = "active"  # active | withered | promoted
    # stated (a human said it) | observed (an agent saw it) | inferred (an extractor or
    # agent concluded it)
    provenance: str = "observed"
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Reinforcement(_Record):
    id: str
    mark_id: str
    reinforced_at: datetime
    reinforced_by: str
    evidence: dict[str, Any]
    strength_delta: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Seed(_Record):
    """A proposal that the user add something to a substrate file. Never applied here."""

    id: str
    workspace_id: str
    subject: str
    proposed_change: str
    target_file: str
    based_on_marks: list[str]
    planted_at: datetime
    planted_by: str
    state: str = "pending"  # pending | accepted | rejected
    reviewed_at: datetime | None = None
    reviewed_by: str | None = None
    created_at: datetime
    updated_at: datetime
