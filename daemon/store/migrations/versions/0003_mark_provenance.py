"""Marks say where they come from: provenance stated / observed / inferred.

Marks made before this column existed came from observation signals or the mock extractor
(OBS lines), or from `cambium memory mark` (stated; its evidence note names the user); the
latter are recognised by their evidence note.

Revision ID: 0003
Revises: 0001
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memory_marks") as batch:
        batch.add_column(
            sa.Column("provenance", sa.String(16), nullable=False, server_default="observed")
        )
    evidence = sa.cast(sa.column("evidence", sa.JSON()), sa.Text())
    op.execute(
        sa.table("memory_marks", sa.column("provenance"), sa.column("evidence"))
        .update()
        .where(evidence.like("%via cambium memory mark%"))
        .values(provenance="stated")
    )


def downgrade() -> None:
    with op.batch_alter_table("memory_marks") as batch:
        batch.drop_column("provenance")
