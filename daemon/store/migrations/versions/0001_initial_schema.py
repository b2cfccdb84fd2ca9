"""Initial schema: signals, deliveries, marks, reinforcements, seeds, rhythm state.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INSTANT = sa.DateTime(timezone=True)
NAME = sa.String(128)
SUBJECT = sa.String(512).with_variant(sa.String(512, collation="NOCASE"), "sqlite")


def upgrade() -> None:
    op.create_table(
        "signals",
        sa.Column("id", NAME, primary_key=True),
        sa.Column("type", NAME, nullable=False),
        sa.Column("class", NAME, nullable=False),
        sa.Column("source_layer", NAME, nullable=False),
        sa.Column("source_id", NAME, nullable=False),
        sa.Column("workspace_id", NAME, nullable=False),
        sa.Column("intensity", sa.Float(), nullable=False),
        sa.Column("decay_rate", sa.Float(), nullable=False),
        sa.Column("cascade_potential", sa.Boolean(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("affinity", sa.JSON(), nullable=False),
        sa.Column("emitted_at", INSTANT, nullable=False),
        sa.Column("stored_at", INSTANT, nullable=False),
        sa.Column("idempotency_key", sa.String(256), nullable=True, unique=True),
        sa.Column("correlation_id", NAME, nullable=True),
        sa.Column("causation_id", NAME, nullable=True),
    )
    op.create_index("ix_signals_stored_at", "signals", ["stored_at"])
    op.create_index("ix_signals_type_stored", "signals", ["type", "stored_at"])

    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("signal_id", NAME, sa.ForeignKey("signals.id"), nullable=False),
        sa.Column("receptor", NAME, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.String(), nullable=True),
        sa.Column("next_attempt_at", INSTANT, nullable=True),
        sa.Column("checkpoint", sa.JSON(), nullable=True),
        sa.Column("created_at", INSTANT, nullable=False),
        sa.Column("updated_at", INSTANT, nullable=False),
        sa.Column("delivered_at", INSTANT, nullable=True),
        sa.UniqueConstraint("signal_id", "receptor", name="uq_deliveries_signal_receptor"),
    )
    op.create_index("ix_deliveries_receptor_status_id", "deliveries", ["receptor", "status", "id"])
    op.create_index("ix_deliveries_status", "deliveries", ["status"])

    op.create_table(
        "memory_marks",
        sa.Column("id", NAME, primary_key=True),
        sa.Column("workspace_id", NAME, nullable=False),
        sa.Column("subject", SUBJECT, nullable=False),
        sa.Column("observation", sa.String(), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("initial_strength", sa.Float(), nullable=False),
        sa.Column("decay_rate", sa.Float(), nullable=False),
        sa.Column("observed_by", NAME, nullable=False),
        sa.Column("first_observed_at", INSTANT, nullable=False),
        sa.Column("last_reinforced_at", INSTANT, nullable=False),
        sa.Column("reinforcement_count", sa.Integer(), nullable=False),
        sa.Column("affinity", sa.JSON(), nullable=False),
        sa.Column("substrate_refs", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", INSTANT, nullable=False),
        sa.Column("updated_at", INSTANT, nullable=False),
    )
    op.create_index("ix_memory_marks_workspace_id", "memory_marks", ["workspace_id"])
    op.create_index(
        "ix_memory_marks_workspace_subject",
        "memory_marks",
        ["workspace_id", "subject"],
        postgresql_ops={"subject": "text_pattern_ops"},
    )
    op.create_index(
        "ix_memory_marks_workspace_fingerprint", "memory_marks", ["workspace_id", "fingerprint"]
    )
    op.create_index("ix_memory_marks_state", "memory_marks", ["state"])
    op.create_index("ix_memory_marks_first_observed", "memory_marks", ["first_observed_at"])

    op.create_table(
        "memory_mark_reinforcements",
        sa.Column("id", NAME, primary_key=True),
        sa.Column("mark_id", NAME, sa.ForeignKey("memory_marks.id"), nullable=False),
        sa.Column("reinforced_at", INSTANT, nullable=False),
        sa.Column("reinforced_by", NAME, nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("strength_delta", sa.Float(), nullable=False),
    )
    op.create_index(
        "ix_memory_mark_reinforcements_mark_id", "memory_mark_reinforcements", ["mark_id"]
    )
    op.create_index(
        "ix_memory_mark_reinforcements_reinforced_at",
        "memory_mark_reinforcements",
        ["reinforced_at"],
    )

    op.create_table(
        "memory_seeds",
        sa.Column("id", NAME, primary_key=True),
        sa.Column("workspace_id", NAME, nullable=False),
        sa.Column("subject", sa.String(512), nullable=False),
        sa.Column("proposed_change", sa.String(), nullable=False),
        sa.Column("target_file", sa.String(1024), nullable=False),
        sa.Column("based_on_marks", sa.JSON(), nullable=False),
        sa.Column("planted_at", INSTANT, nullable=False),
        sa.Column("planted_by", NAME, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reviewed_at", INSTANT, nullable=True),
        sa.Column("reviewed_by", NAME, nullable=True),
        sa.Column("created_at", INSTANT, nullable=False),
        sa.Column("updated_at", INSTANT, nullable=False),
    )
    op.create_index("ix_memory_seeds_workspace_id", "memory_seeds", ["workspace_id"])
    op.create_index("ix_memory_seeds_state", "memory_seeds", ["state"])
    op.create_index("ix_memory_seeds_planted_at", "memory_seeds", ["planted_at"])

    op.create_table(
        "rhythm_state",
        sa.Column("name", NAME, primary_key=True),
        sa.Column("first_scheduled_at", INSTANT, nullable=False),
    )


def downgrade() -> None:
    for table in (
        "rhythm_state",
        "memory_seeds",
        "memory_mark_reinforcements",
        "memory_marks",
        "deliveries",
        "signals",
    ):
        op.drop_table(table)
