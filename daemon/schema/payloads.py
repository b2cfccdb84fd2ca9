"""The payload contract of each signal type the receptors apply (named in
:mod:`daemon.schema.signal_types`). The receptors check payloads against them; the MCP
server's tool arguments extend them, so a tool takes exactly what its signal accepts."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from daemon.schema.fields import (
    Day,
    DayFile,
    EvidenceInstant,
    LineRange,
    Name,
    Payload,
    Provenance,
    Subject,
    SubstrateRef,
    Tags,
    TargetFile,
    Text,
)

# -- memory.observation ------------------------------------------------------------------


class Evidence(Payload):
    signal_ids: list[Name] = Field(default_factory=list)
    daily_file: DayFile | None = None
    line_range: LineRange | None = None
    compost_ids: list[Name] = Field(default_factory=list)
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
    substrate_refs: list[SubstrateRef] = Field(default_factory=list)
    provenance: Provenance = "observed"
    observed_at: EvidenceInstant | None = None  # when it was seen or said; else emitted_at


# -- memory.daily_note, memory.consolidate, memory.seed_digest ---------------------------


def _one_line(value: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError("must be a single line")
    return value


class DailyNote(Payload):
    text: Annotated[Text, AfterValidator(_one_line)]
    date: Day | None = None


class Consolidate(Payload):
    date: Day | None = None
    through: Day | None = None

    @model_validator(mode="after")
    def _one_way_to_name_days(self) -> Consolidate:
        if self.date is not None and self.through is not None:
            raise ValueError("give date (one day) or through (every day up to it), not both")
        return self


class SeedDigest(Payload):
    date: Day | None = None


# -- memory.seed_planted, memory.seed_reviewed, memory.seed_review_undone ----------------


class SeedPlanted(Payload):
    subject: Subject
    proposed_change: Text
    target_file: TargetFile
    based_on_marks: list[Name] = Field(default_factory=list)


class SeedReviewed(Payload):
    seed_id: Name
    decision: Literal["accepted", "rejected"]
    reviewer: Name


class SeedReviewUndone(Payload):
    seed_id: Name
    reviewer: Name


# -- memory.mark_corrected, memory.mark_retracted, memory.forget -------------------------


class MarkCorrected(Payload):
    mark_id: Name
    text: Text
    reason: Text


class MarkRetracted(Payload):
    mark_id: Name
    reason: Text


class Forget(Payload):
    subject: Subject | None = None
    mark_id: Name | None = None
    reason: Text

    @model_validator(mode="after")
    def _one_target(self) -> Forget:
        if (self.subject is None) == (self.mark_id is None):
            raise ValueError("needs exactly one of subject and mark_id")
        return self


# -- memory.delivery_discarded -----------------------------------------------------------


class DeliveryDiscarded(Payload):
    """Give up on dead deliveries for good (the signal's source is who did): a signal's (to
    one receptor, or to every one), or every one of a receptor's that was dead when the
    discard was emitted."""

    signal_id: Name | None = None
    receptor: Name | None = None

    @model_validator(mode="after")
    def _something_named(self) -> DeliveryDiscarded:
        if self.signal_id is None and self.receptor is None:
            raise ValueError("needs signal_id, receptor, or both")
        return self
