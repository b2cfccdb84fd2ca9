"""Marks: ``decay_rate`` is the half-life in days; call it ``half_life_days``.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE ... RENAME COLUMN (SQLite 3.25+, PostgreSQL): no table copy, so the
# subject index and its NOCASE collation stay exactly as they are.
def upgrade() -> None:
    op.execute("ALTER TABLE memory_marks RENAME COLUMN decay_rate TO half_life_days")


def downgrade() -> None:
    op.execute("ALTER TABLE memory_marks RENAME COLUMN half_life_days TO decay_rate")
