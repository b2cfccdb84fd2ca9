"""Embeddings are stored rows: the vectors of daily lines and marks, for semantic recall.

``dense_vectors`` holds one row per daily line (its day, live or archived, its number) and
per mark, with the SHA-256 of the texts embedded and the vector as int8 bytes and a scale;
``dense_groups`` records which daily files are wholly embedded (by the text index's
signatures); ``dense_state`` names the model and counts changes, so that the memory-mapped
copy the daemon searches knows whether it is current. Nothing is embedded here: the
daemon's background worker fills the tables, resumably.

Revision ID: 0010
Revises: 0008 (the lead chains it after 0009 when merging)
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dense_vectors",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("layer", sa.String(16), nullable=False),
        sa.Column("scope", sa.String(128), nullable=False),
        sa.Column("source", sa.String(512), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("digest", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.LargeBinary(32), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("scale", sa.Float(), nullable=False),
        sa.UniqueConstraint("layer", "source", "state", "part", name="uq_dense_vectors_place"),
    )
    op.create_index("ix_dense_vectors_hash", "dense_vectors", ["hash"])
    op.create_table(
        "dense_groups",
        sa.Column("layer", sa.String(16), primary_key=True),
        sa.Column("source", sa.String(512), primary_key=True),
        sa.Column("state", sa.String(16), primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
    )
    state = op.create_table(
        "dense_state",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
    )
    op.bulk_insert(state, [{"id": 1, "model": "", "generation": 0}])


def downgrade() -> None:
    for table in ("dense_state", "dense_groups", "dense_vectors"):
        op.drop_table(table)
