"""The daemon API's answers, typed. Unknown fields are kept (a newer daemon may add some),
so ``model_dump(mode="json", by_alias=True)`` gives back what the daemon said."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


class ObservedMark(_Answer):
    """The mark a delivered observation made, or the one it reinforced."""

    id: str
    outcome: Literal["made", "reinforced"]


class Emitted(_Answer):
    """A signal the daemon has stored durably."""

    id: str
    duplicate: bool  # true: this idempotency key (or id) was already stored; nothing new
    idempotency_key: str | None = None  # the key it was sent with
    deliveries: dict[str, str] | None = None  # receptor -> status, when the call waited
    mark: ObservedMark | None = None  # an observation's, once delivered within the wait

    @property
    def dead(self) -> list[str]:
        """Receptors whose delivery failed for good (see :meth:`Client.signal`)."""
        return [r for r, status in (self.deliveries or {}).items() if status == "dead"]

    @property
    def pending(self) -> list[str]:
        return [r for r, status in (self.deliveries or {}).items() if status == "pending"]


class Discarded(_Answer):
    """Who gave up on a dead delivery, when, and the signal that records it."""

    by: str
    at: datetime
    signal_id: str


class DeliveryItem(_Answer):
    receptor: str
    status: str  # pending | delivered | dead | discarded
    attempts: int
    last_error: str | None = None
    next_attempt_at: datetime | None = None
    delivered_at: datetime | None = None
    discarded: Discarded | None = None


class StoredSignal(_Answer):
    id: str
    type: str
    signal_class: str = Field(alias="class")
    source_layer: str
    source_id: str
    workspace_id: str | None
    intensity: float
    decay_rate: float
    payload: dict[str, Any]
    affinity: list[str]
    emitted_at: datetime
    idempotency_key: str | None = None
    stored_at: datetime | None = None
    deliveries: list[DeliveryItem] = []


class Retried(_Answer):
    id: str
    revived: list[str]
    deliveries: dict[str, str] | None = None


class Discard(_Answer):
    """A discard of dead deliveries: its signal, and whether it was applied within the
    wait (if not, it is stored and will be)."""

    signal_id: str
    applied: bool


class MarkItem(_Answer):
    id: str
    subject: str
    observation: str
    current_strength: float
    state: str
    observed_by: str
    first_observed_at: datetime
    last_reinforced_at: datetime
    reinforcement_count: int
    evidence: dict[str, Any]


class SubstrateItem(_Answer):
    file: str
    excerpt: str
    reason: str


class DailyItem(_Answer):
    date: str
    excerpt: str
    line_range: tuple[int, int]


class CompostItem(_Answer):
    template_id: str
    learning: str
    source_agent_count: int


class Covered(_Answer):
    """With semantic recall on: how many of the documents ranked by meaning (daily lines,
    marks, substrate lines) are embedded; the others were ranked by their words alone."""

    embedded: int
    total: int


class Recall(_Answer):
    substrate: list[SubstrateItem]
    marks: list[MarkItem]
    daily: list[DailyItem]
    compost: list[CompostItem]
    summary: str | None = None
    semantic: Covered | None = None  # only with semantic recall on


class Embedding(Covered):
    """The embedding worker's progress (health, with semantic recall on)."""

    lines_per_second: float


class Preparation(_Answer):
    """Where the start's bringing of the text index up to date is (health, while the index
    is "preparing"): the layer, and for the daily layer the files looked at of ``total``,
    for the marks those indexed of those queued (0 and 0 where a layer does not count)."""

    layer: str  # marks | daily | substrate and compost | word counts
    done: int
    total: int


class ContextBlock(_Answer):
    """Prompt-ready text: whole items inside an untrusted-data envelope, at most
    ``max_chars`` long."""

    text: str
    included: int  # items in the block
    left_out: int  # items that matched but did not fit
    max_chars: int


class SeedItem(_Answer):
    """A seed as the API shows it (the stored record is :class:`daemon.core.records.Seed`)."""

    id: str
    subject: str
    proposed_change: str
    target_file: str
    based_on_marks: list[str]
    planted_at: datetime
    planted_by: str
    state: str
    reviewed_at: datetime | None = None
    reviewed_by: str | None = None


class Reviewed(SeedItem):
    signal_id: str  # the memory.seed_reviewed signal that carried the decision


class ReceptorInfo(_Answer):
    key: str
    binds: list[str]


class Health(_Answer):
    status: str  # ok, or degraded with the cause in ``problem``
    problem: str | None = None
    version: str
    uptime_seconds: float
    workspace: str
    receptors: list[ReceptorInfo]
    deliveries: dict[str, int]
    rhythms: dict[str, datetime | None]
    substrate: dict[str, list[str]]
    index: str = "ready"  # or "preparing": the start is bringing the text index up to date
    preparation: Preparation | None = None  # while preparing
    embedding: Embedding | None = None  # only with semantic recall on
