"""The tools' arguments: the wire schema's own models (recall's query, the payload
contracts), extended with what every write takes, so a tool accepts exactly what its signal
or query does and ``tools/list`` shows their JSON schemas."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from daemon.schema.payloads import (
    DailyNote,
    Evidence,
    Forget,
    MarkCorrected,
    Observation,
    SeedPlanted,
)
from daemon.schema.recall import ContextQuery, RecallQuery


class Retryable(BaseModel):
    """A write's idempotency key: the same key again is stored at most once."""

    model_config = ConfigDict(extra="forbid")

    idempotency_key: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Send the same key again to retry safely after an unclear outcome: "
        "the memory stores it at most once.",
    )


class WriteOptions(Retryable):
    """What every signal-writing tool takes besides its payload."""

    intensity: float | None = Field(
        None, ge=0, le=1, description="How sure or important, 0..1 (default 0.7)."
    )
    decay_days: float | None = Field(
        None, ge=0, description="Half-life in days; 0 never fades (default 14)."
    )


class RecallArgs(RecallQuery):
    pass


class ContextArgs(ContextQuery):
    pass


class ObserveArgs(Observation, WriteOptions):
    evidence: Evidence | None = Field(  # type: ignore[assignment]
        None,
        description="Where this was seen: {note: '...'} at least (default: a note naming you).",
    )


class NoteArgs(DailyNote, WriteOptions):
    pass


class PlantSeedArgs(SeedPlanted, WriteOptions):
    pass


class ListSeedsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: Literal["pending", "accepted", "rejected"] | None = Field(
        None, description="Only seeds in this state (default: all)."
    )


class CorrectArgs(MarkCorrected, Retryable):
    pass


class ForgetArgs(Forget, Retryable):
    pass
