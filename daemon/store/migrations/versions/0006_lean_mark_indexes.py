"""Marks keep only the indexes their queries use.

Every index is one more page for each mark's insert to write, and on SQLite the emit's
commit carries the mark (the fast path): its fsync grows with the pages. The index on
``workspace_id`` alone is the prefix of the (workspace, subject) and (workspace,
fingerprint) indexes; no query filters or sorts by ``first_observed_at`` alone; and the
only query on ``state`` alone asks for the forgotten marks, which a partial index serves
without an entry for every other mark.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FORGOTTEN = sa.text("state = 'forgotten'")


def upgrade() -> None:
    op.drop_index("ix_memory_marks_workspace_id", table_name="memory_marks")
    op.drop_index("ix_memory_marks_first_observed", table_name="memory_marks")
    op.drop_index("ix_memory_marks_state", table_name="memory_marks")
    op.create_index(
        "ix_memory_marks_forgotten",
        "memory_marks",
        ["id"],
        sqlite_where=FORGOTTEN,
        postgresql_where=FORGOTTEN,
    )


def downgrade() -> None:
    op.drop_index("ix_memory_marks_forgotten", table_name="memory_marks")
    op.create_index("ix_memory_marks_state", "memory_marks", ["state"])
    op.create_index("ix_memory_marks_first_observed", "memory_marks", ["first_observed_at"])
    op.create_index("ix_memory_marks_workspace_id", "memory_marks", ["workspace_id"])
