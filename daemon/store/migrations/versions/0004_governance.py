"""Memory governance: marks that are superseded, retracted or forgotten keep their history;
seeds wither; forgetting leaves a tombstone.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INSTANT = sa.DateTime(timezone=True)
NAME = sa.String(128)


# Plain ALTER TABLE ... ADD COLUMN (nullable, no default): no table copy on SQLite, so the
# existing indexes stay as they are and existing rows read as "never ended".
def upgrade() -> None:
    op.add_column("memory_marks", sa.Column("supersedes", NAME, nullable=True))
    op.add_column("memory_marks", sa.Column("superseded_by", NAME, nullable=True))
    op.add_column("memory_marks", sa.Column("ended_at", INSTANT, nullable=True))
    op.add_column("memory_marks", sa.Column("ended_reason", sa.String(), nullable=True))
    op.add_column("memory_seeds", sa.Column("withered_at", INSTANT, nullable=True))
    op.create_table(
        "memory_tombstones",
        sa.Column("id", NAME, primary_key=True),
        sa.Column("workspace_id", NAME, nullable=False),
        sa.Column("target", sa.String(512), nullable=False),
        sa.Column("target_kind", sa.String(16), nullable=False),
        sa.Column("forgotten_by", NAME, nullable=False),
        sa.Column("forgotten_at", INSTANT, nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("marks_erased", sa.Integer(), nullable=False),
        sa.Column("signals_erased", sa.Integer(), nullable=False),
        sa.Column("signal_id", NAME, nullable=False),
    )
    op.create_index("ix_memory_tombstones_workspace_id", "memory_tombstones", ["workspace_id"])


def downgrade() -> None:
    op.drop_index("ix_memory_tombstones_workspace_id", table_name="memory_tombstones")
    op.drop_table("memory_tombstones")
    with op.batch_alter_table("memory_seeds") as seeds:
        seeds.drop_column("withered_at")
    with op.batch_alter_table("memory_marks") as marks:
        for column in ("ended_reason", "ended_at", "superseded_by", "supersedes"):
            marks.drop_column(column)
