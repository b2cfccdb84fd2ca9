"""Marks say where they come from (provenance stated / observed / inferred), and their
fingerprints ignore case, whitespace and punctuation, so near-copies are found by index.

Marks made before this column existed came from observation signals or the mock extractor
(OBS lines), or from `cambium memory mark` (stated; its evidence note names the user); the
latter are recognised by their evidence note.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

import hashlib
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

from daemon.store.marks import fingerprint

revision: str = "0003"
down_revision: str | None = "0002"
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
    _refingerprint(fingerprint)


def _refingerprint(rule: Callable[[str, str], str]) -> None:
    marks = sa.table(
        "memory_marks",
        sa.column("id"),
        sa.column("subject"),
        sa.column("observation"),
        sa.column("fingerprint"),
    )
    connection = op.get_bind()
    rows = connection.execute(sa.select(marks.c.id, marks.c.subject, marks.c.observation)).all()
    update = (
        marks.update()
        .where(marks.c.id == sa.bindparam("mark_id"))
        .values(fingerprint=sa.bindparam("new"))
    )
    for start in range(0, len(rows), 1000):
        connection.execute(
            update,
            [
                {"mark_id": i, "new": rule(subject, text)}
                for i, subject, text in rows[start : start + 1000]
            ],
        )


def downgrade() -> None:
    with op.batch_alter_table("memory_marks") as batch:
        batch.drop_column("provenance")
    _refingerprint(exact_text)


def exact_text(subject: str, observation: str) -> str:
    """The fingerprint before 0003: of the text exactly as written."""
    return hashlib.sha256(f"{subject}\x1f{observation}".encode()).hexdigest()[:32]
