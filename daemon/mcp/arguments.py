"""The tools' arguments: the wire schema's own models (recall's query, the payload
contracts), extended with what every write takes, so a tool accepts exactly what its signal
or query does and ``tools/list`` shows their JSON schemas. Each also takes the names agents
habitually use for its arguments (``query`` for ``about``), listed in ``ALIASES``."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from daemon.schema.payloads import (
    DailyNote,
    Evidence,
    Forget,
    MarkCorrected,
    Observation,
    SeedPlanted,
)
from daemon.schema.recall import ContextQuery, RecallQuery


class Aliased(BaseModel):
    """Takes an alias in place of the argument it stands for (given both, the alias is an
    unknown argument, as any other would be)."""

    ALIASES: ClassVar[dict[str, str]] = {}  # alias -> argument

    @model_validator(mode="before")
    @classmethod
    def _aliases_named_as_arguments(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        named = dict(data)
        for alias, argument in cls.ALIASES.items():
            if alias in named and argument not in named:
                named[argument] = named.pop(alias)
        return named


def alias_names(model: type[BaseModel], argument: str) -> list[str]:
    """The aliases ``model`` takes for ``argument``."""
    aliases: dict[str, str] = getattr(model, "ALIASES", {})
    return [alias for alias, name in aliases.items() if name == argument]


_QUERY_ALIASES = {
    "query": "about",
    "q": "about",
    "topic": "about",
    "search": "about",
    "subject": "about",
    "top_k": "limit",
    "k": "limit",
    "max_results": "limit",
}


class Retryable(Aliased):
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


class RecallArgs(RecallQuery, Aliased):
    ALIASES: ClassVar[dict[str, str]] = _QUERY_ALIASES


class ContextArgs(ContextQuery, Aliased):
    ALIASES: ClassVar[dict[str, str]] = _QUERY_ALIASES


class ObserveArgs(Observation, WriteOptions):
    ALIASES: ClassVar[dict[str, str]] = {
        "fact": "observation",
        "text": "observation",
        "content": "observation",
        "topic": "subject",
        "key": "subject",
        "tags": "affinity",
    }
    evidence: Evidence | None = Field(  # type: ignore[assignment]
        None,
        description="Where this was seen: {note: '...'} at least (default: a note naming you).",
    )


class NoteArgs(DailyNote, WriteOptions):
    ALIASES: ClassVar[dict[str, str]] = {
        "note": "text",
        "content": "text",
        "line": "text",
        "entry": "text",
        "message": "text",
        "day": "date",
    }


class PlantSeedArgs(SeedPlanted, WriteOptions):
    ALIASES: ClassVar[dict[str, str]] = {
        "change": "proposed_change",
        "proposal": "proposed_change",
        "text": "proposed_change",
        "file": "target_file",
        "path": "target_file",
        "marks": "based_on_marks",
        "mark_ids": "based_on_marks",
    }


class ListSeedsArgs(Aliased):
    model_config = ConfigDict(extra="forbid")
    ALIASES: ClassVar[dict[str, str]] = {"status": "state"}

    state: Literal["pending", "accepted", "rejected"] | None = Field(
        None, description="Only seeds in this state (default: all)."
    )


class CorrectArgs(MarkCorrected, Retryable):
    ALIASES: ClassVar[dict[str, str]] = {
        "id": "mark_id",
        "new_text": "text",
        "correction": "text",
        "why": "reason",
    }


class ForgetArgs(Forget, Retryable):
    ALIASES: ClassVar[dict[str, str]] = {"id": "mark_id", "why": "reason"}


class GetMarkArgs(Aliased):
    model_config = ConfigDict(extra="forbid")
    ALIASES: ClassVar[dict[str, str]] = {"id": "mark_id"}

    mark_id: str = Field(min_length=1, max_length=128)


class ChangesArgs(Aliased):
    model_config = ConfigDict(extra="forbid")
    ALIASES: ClassVar[dict[str, str]] = {"after": "since", "from": "since"}

    since: AwareDatetime


class DiscardArgs(Retryable):
    signal_id: str | None = Field(None, min_length=1, max_length=128)
    receptor: str | None = Field(None, min_length=1, max_length=128)
    all: bool = False

    @model_validator(mode="after")
    def _one_target(self) -> DiscardArgs:
        if (self.signal_id is None) == (not self.all) or (self.all and self.receptor is None):
            raise ValueError("give signal_id, or receptor with all: true")
        return self
