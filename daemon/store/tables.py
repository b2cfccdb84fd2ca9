"""The SQL tables (SQLModel). Alembic migrations in ``daemon/store/migrations`` create them;
the metadata here is what those migrations are checked against."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC instants on every backend (SQLite has no time zone type)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# Subjects are stored normalized (lowercase). On SQLite a NOCASE column lets `LIKE 'p%'` use
# the (workspace_id, subject) index; PostgreSQL gets a text_pattern_ops index instead.
# The log's sequence: 64-bit on PostgreSQL; on SQLite only INTEGER makes a rowid alias.
SEQUENCE = BigInteger().with_variant(Integer(), "sqlite")

SUBJECT = String(512).with_variant(String(512, collation="NOCASE"), "sqlite")


def _instant(nullable: bool = False, index: bool = False) -> Any:
    return Field(sa_column=Column(UTCDateTime(), nullable=nullable, index=index))


def _json(default: Any) -> Any:
    return Field(default_factory=default, sa_column=Column(JSON, nullable=False))


class SignalTable(SQLModel, table=True):
    """The signal log: one row per signal, appended in commit order (``seq``), never deleted.
    Indexed only for what is asked of it: by id and by idempotency key. The workers read it
    in ``seq`` order, its own key, and skip the types they do not bind (migration 0011)."""

    __tablename__ = "signals"
    __table_args__ = (
        UniqueConstraint("id", name="uq_signals_id"),
        # Partial: most signals have no key, and an index entry per NULL is insert cost only.
        Index(
            "uq_signals_idempotency_key",
            "idempotency_key",
            unique=True,
            sqlite_where=text("idempotency_key IS NOT NULL"),
            postgresql_where=text("idempotency_key IS NOT NULL"),
        ),
    )

    # INTEGER PRIMARY KEY is SQLite's rowid: the sequence costs no index of its own.
    seq: int | None = Field(
        default=None,
        sa_column=Column(SEQUENCE, primary_key=True, autoincrement=True),
    )
    id: str = Field(max_length=128)
    type: str = Field(max_length=128)
    signal_class: str = Field(sa_column=Column("class", String(128), nullable=False))
    source_layer: str = Field(max_length=128)
    source_id: str = Field(max_length=128)
    workspace_id: str = Field(max_length=128)
    intensity: float
    decay_rate: float
    cascade_potential: bool
    payload: dict[str, Any] = _json(dict)
    affinity: list[str] = _json(list)
    emitted_at: datetime = _instant()
    stored_at: datetime = _instant()
    idempotency_key: str | None = Field(default=None, max_length=256)
    correlation_id: str | None = Field(default=None, max_length=128)
    causation_id: str | None = Field(default=None, max_length=128)


class ReceptorCursorTable(SQLModel, table=True):
    """Where each receptor is in the log: every signal it binds up to ``position`` is settled
    (delivered or dead). Advanced in the same transaction as the receptor's effects. Signals
    stored before the receptor first ran (``seq <= since``) are not its to deliver. On
    PostgreSQL a fleet's daemons take a receptor through its lease (``owner`` until
    ``lease_until``). On SQLite the key is the row (WITHOUT ROWID): one b-tree to read."""

    __tablename__ = "receptor_cursors"
    __table_args__ = ({"sqlite_with_rowid": False},)

    receptor: str = Field(primary_key=True, max_length=128)
    binds: list[str] = _json(list)
    since: int = Field(sa_column=Column(SEQUENCE, nullable=False))
    position: int = Field(sa_column=Column(SEQUENCE, nullable=False))
    owner: str | None = Field(default=None, max_length=256)
    lease_until: datetime | None = _instant(nullable=True)
    updated_at: datetime = _instant()


class DeliveryFailureTable(SQLModel, table=True):
    """The exceptions to "at or below the cursor is delivered": a delivery that failed (still
    ``pending`` with its next attempt, or ``dead``), that saved a checkpoint, or that was
    ``delivered`` only after failing. A row per (receptor, signal); most signals have none."""

    __tablename__ = "delivery_failures"
    __table_args__ = (Index("ix_delivery_failures_status", "status"),)

    receptor: str = Field(primary_key=True, max_length=128)
    seq: int = Field(sa_column=Column(SEQUENCE, primary_key=True, autoincrement=False))
    signal_id: str = Field(max_length=128, index=True)
    status: str = Field(max_length=16)  # pending | delivered | dead
    attempts: int = 0
    last_error: str | None = None
    next_attempt_at: datetime | None = _instant(nullable=True)
    checkpoint: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    updated_at: datetime = _instant()


class MarkTable(SQLModel, table=True):
    """A typed, timestamped, evidence-linked observation about a dot-path subject."""

    __tablename__ = "memory_marks"
    __table_args__ = (
        # One index for the subject's prefix query and the repeat look-up (a fingerprint is
        # a hash of the subject and the text: its subject is always known beside it).
        Index(
            "ix_memory_marks_workspace_subject_fingerprint",
            "workspace_id",
            "subject",
            "fingerprint",
            postgresql_ops={"subject": "text_pattern_ops"},
        ),
        # Every index is a page more for each insert, which the emit's fsync carries: only
        # the forgotten marks are ever looked up by state alone.
        Index(
            "ix_memory_marks_forgotten",
            "id",
            sqlite_where=text("state = 'forgotten'"),
            postgresql_where=text("state = 'forgotten'"),
        ),
    )

    id: str = Field(primary_key=True, max_length=128)
    workspace_id: str = Field(max_length=128)
    subject: str = Field(sa_column=Column(SUBJECT, nullable=False))
    observation: str
    # Hash of (subject, observation): finds "the same observation" through an index,
    # however long the text. Set by the store on insert.
    fingerprint: str = Field(default="", max_length=64)
    evidence: dict[str, Any] = _json(dict)
    initial_strength: float
    half_life_days: float  # 0 = no decay
    observed_by: str = Field(max_length=128)
    first_observed_at: datetime = _instant()
    last_reinforced_at: datetime = _instant()
    reinforcement_count: int = 0
    affinity: list[str] = _json(list)
    substrate_refs: list[str] = _json(list)
    # active | withered | promoted | superseded | retracted | forgotten
    state: str = Field(default="active", max_length=16)
    supersedes: str | None = Field(default=None, max_length=128)  # the mark this corrects
    superseded_by: str | None = Field(default=None, max_length=128)  # its correction
    ended_at: datetime | None = _instant(nullable=True)  # superseded, retracted or forgotten
    ended_reason: str | None = None
    provenance: str = Field(default="observed", max_length=16)  # stated | observed | inferred
    created_at: datetime = _instant()
    updated_at: datetime = _instant()


class ReinforcementTable(SQLModel, table=True):
    __tablename__ = "memory_mark_reinforcements"

    id: str = Field(primary_key=True, max_length=128)
    mark_id: str = Field(foreign_key="memory_marks.id", index=True, max_length=128)
    reinforced_at: datetime = _instant(index=True)
    reinforced_by: str = Field(max_length=128)
    evidence: dict[str, Any] = _json(dict)
    strength_delta: float


class SeedTable(SQLModel, table=True):
    """A proposal that the user add something to a substrate file. Never applied here."""

    __tablename__ = "memory_seeds"

    id: str = Field(primary_key=True, max_length=128)
    workspace_id: str = Field(max_length=128, index=True)
    subject: str = Field(max_length=512)
    proposed_change: str
    target_file: str = Field(max_length=1024)
    based_on_marks: list[str] = _json(list)
    planted_at: datetime = _instant(index=True)
    planted_by: str = Field(max_length=128)
    state: str = Field(default="pending", max_length=16, index=True)  # + accepted|rejected|withered
    reviewed_at: datetime | None = _instant(nullable=True)
    reviewed_by: str | None = Field(default=None, max_length=128)
    withered_at: datetime | None = _instant(nullable=True)
    created_at: datetime = _instant()
    updated_at: datetime = _instant()


class TombstoneTable(SQLModel, table=True):
    """What a ``memory.forget`` erased: who, when, why and how many, never the text."""

    __tablename__ = "memory_tombstones"

    id: str = Field(primary_key=True, max_length=128)
    workspace_id: str = Field(max_length=128, index=True)
    target: str = Field(max_length=512)  # the subject prefix or the mark id
    target_kind: str = Field(max_length=16)  # subject | mark
    forgotten_by: str = Field(max_length=128)
    forgotten_at: datetime = _instant()
    reason: str
    marks_erased: int
    signals_erased: int
    signal_id: str = Field(max_length=128)


class RhythmStateTable(SQLModel, table=True):
    """When each rhythm was first scheduled, so catch-up never fires slots from before."""

    __tablename__ = "rhythm_state"

    name: str = Field(primary_key=True, max_length=128)
    first_scheduled_at: datetime = _instant()


# -- the text index (daemon.store.text_index) ---------------------------------------------
# Beside these tables the migration makes what the models cannot say: on SQLite an FTS5
# table per layer over ``text_rows.terms`` (external content, kept by triggers) and its
# fts5vocab; on PostgreSQL a generated ``tsv`` column with a GIN index; on both, triggers
# that keep ``text_totals`` and queue every new or changed mark in ``text_pending``.


class TextRowTable(SQLModel, table=True):
    """One indexed text: a daily line or a mark, as its pre-stemmed terms."""

    __tablename__ = "text_rows"
    __table_args__ = (
        UniqueConstraint("layer", "source", "state", "part", name="uq_text_rows_place"),
    )

    id: int | None = Field(
        default=None, sa_column=Column(SEQUENCE, primary_key=True, autoincrement=True)
    )
    layer: str = Field(max_length=16)  # daily | marks
    scope: str = Field(default="", max_length=128)  # a mark's workspace
    source: str = Field(max_length=512)  # the day (YYYY-MM-DD) or the mark id
    state: str = Field(default="", max_length=16)  # daily: live | claimed | archived
    part: int  # the line number
    terms: str  # the stemmed terms, space-separated
    length: int  # how many terms
    digest: int = Field(sa_column=Column(BigInteger(), nullable=False))  # of the text
    speaker: str | None = Field(default=None, max_length=128)  # casefolded


class TextFileTable(SQLModel, table=True):
    """The file a group of rows was read from, as it was then."""

    __tablename__ = "text_files"

    layer: str = Field(primary_key=True, max_length=16)
    source: str = Field(primary_key=True, max_length=512)
    state: str = Field(primary_key=True, max_length=16)
    size: int = Field(sa_column=Column(BigInteger(), nullable=False))
    mtime_ns: int = Field(sa_column=Column(BigInteger(), nullable=False))
    sha256: str = Field(max_length=64)


class TextTotalsTable(SQLModel, table=True):
    """Per layer: how many rows hold terms, and how many terms they hold (for BM25); and
    how many rows there are (what the embedding worker could embed)."""

    __tablename__ = "text_totals"

    layer: str = Field(primary_key=True, max_length=16)
    documents: int = Field(sa_column=Column(BigInteger(), nullable=False))
    total_length: int = Field(sa_column=Column(BigInteger(), nullable=False))
    row_count: int = Field(
        default=0, sa_column=Column(BigInteger(), nullable=False, server_default="0")
    )


class TextPendingTable(SQLModel, table=True):
    """Marks inserted or changed since their text was last indexed."""

    __tablename__ = "text_pending"
    __table_args__ = ({"sqlite_with_rowid": False},)

    mark_id: str = Field(primary_key=True, max_length=128)


class DenseVectorTable(SQLModel, table=True):
    """The meaning of one daily line or mark: its embedding, as int8 and a scale, keyed by
    where it is and by the SHA-256 of what was embedded (so moved or repeated text is not
    embedded again)."""

    __tablename__ = "dense_vectors"
    __table_args__ = (
        UniqueConstraint("layer", "source", "state", "part", name="uq_dense_vectors_place"),
        Index("ix_dense_vectors_hash", "hash"),
    )

    id: int | None = Field(
        default=None, sa_column=Column(SEQUENCE, primary_key=True, autoincrement=True)
    )
    layer: str = Field(max_length=16)  # daily | marks
    scope: str = Field(default="", max_length=128)  # a mark's workspace
    source: str = Field(max_length=512)  # the day (YYYY-MM-DD) or the mark id
    state: str = Field(default="", max_length=16)  # daily: live | archived
    part: int  # the line number (0 for a mark)
    digest: int = Field(sa_column=Column(BigInteger(), nullable=False))  # a mark's text row's
    hash: bytes = Field(sa_column=Column(LargeBinary(32), nullable=False))
    vector: bytes = Field(sa_column=Column(LargeBinary(), nullable=False))  # int8 each
    scale: float = Field(sa_column=Column(Float(), nullable=False))


class DenseGroupTable(SQLModel, table=True):
    """A daily file's lines whose vectors are all stored: the text index's signatures of
    the files they were read from, as a fingerprint."""

    __tablename__ = "dense_groups"

    layer: str = Field(primary_key=True, max_length=16)
    source: str = Field(primary_key=True, max_length=512)
    state: str = Field(primary_key=True, max_length=16)
    fingerprint: str = Field(max_length=64)


class DenseStateTable(SQLModel, table=True):
    """One row: the model the vectors are of, and a counter every change of them bumps (a
    copy of the vectors outside the store knows whether it is current)."""

    __tablename__ = "dense_state"

    id: int = Field(primary_key=True)
    model: str = Field(max_length=128)
    generation: int = Field(sa_column=Column(BigInteger(), nullable=False))
