"""``text_totals`` counts every row of its layer, kept by the same triggers as the rest.

The embedding worker reports how many documents (daily lines and marks) could be embedded.
It counted the rows of ``text_rows`` for that, once a pass and once per daily file it
embedded: 47-57 ms of CPU each at the 1.1M rows of three years of notes. ``documents``
counts only the rows that hold terms (what BM25 needs), and a line without a term (a line
of emoji) is still embedded, so the count is a column of its own: ``row_count``, filled
from the rows here, then kept by the triggers on ``text_rows`` (SQLite) or their function
(PostgreSQL) in the same statement that keeps the other totals.

The trigger statements repeat 0012's with the new column, on purpose: a migration is
history, and must not change when a later one does.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LAYERS = ("daily", "marks", "substrate", "compost")


def _sqlite_triggers(row_count: bool) -> list[str]:
    """0012's triggers on ``text_rows``, keeping ``row_count`` too if ``row_count``."""
    added, removed = (", row_count = row_count + 1", ", row_count = row_count - 1")
    if not row_count:
        added = removed = ""
    return [
        "DROP TRIGGER text_rows_ai",
        "DROP TRIGGER text_rows_ad",
        "CREATE TRIGGER text_rows_ai AFTER INSERT ON text_rows BEGIN "
        + " ".join(
            f"INSERT INTO text_fts_{layer} (rowid, terms) SELECT new.id, new.terms"
            f" WHERE new.layer = '{layer}';"
            for layer in LAYERS
        )
        + " UPDATE text_totals SET documents = documents + (new.length > 0),"
        f" total_length = total_length + new.length{added} WHERE layer = new.layer; END",
        "CREATE TRIGGER text_rows_ad AFTER DELETE ON text_rows BEGIN "
        + " ".join(
            f"INSERT INTO text_fts_{layer} (text_fts_{layer}, rowid, terms)"
            f" SELECT 'delete', old.id, old.terms WHERE old.layer = '{layer}';"
            for layer in LAYERS
        )
        + " UPDATE text_totals SET documents = documents - (old.length > 0),"
        f" total_length = total_length - old.length{removed} WHERE layer = old.layer; END",
    ]


def _postgres_function(row_count: bool) -> str:
    """0008's function behind the trigger on ``text_rows``, keeping ``row_count`` too if
    ``row_count``."""
    added, removed = (", row_count = row_count + 1", ", row_count = row_count - 1")
    if not row_count:
        added = removed = ""
    return f"""CREATE OR REPLACE FUNCTION text_rows_totals() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            UPDATE text_totals SET documents = documents + (NEW.length > 0)::int,
                total_length = total_length + NEW.length{added} WHERE layer = NEW.layer;
            RETURN NEW;
        END IF;
        UPDATE text_totals SET documents = documents - (OLD.length > 0)::int,
            total_length = total_length - OLD.length{removed} WHERE layer = OLD.layer;
        RETURN OLD;
    END $$"""


def _keep_row_count(row_count: bool) -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in _sqlite_triggers(row_count):
            op.execute(statement)
    else:
        op.execute(_postgres_function(row_count))


def upgrade() -> None:
    op.add_column(
        "text_totals",
        sa.Column("row_count", sa.BigInteger(), nullable=False, server_default="0"),
    )
    # Counted in the same transaction as the triggers begin to keep it: no row is missed
    # or counted twice (on SQLite the migration holds the write lock; on PostgreSQL the
    # table's lock, below, holds back writers until the commit).
    if op.get_bind().dialect.name != "sqlite":
        op.execute("LOCK TABLE text_rows IN SHARE MODE")
    op.execute(
        "UPDATE text_totals SET row_count ="
        " (SELECT count(*) FROM text_rows WHERE text_rows.layer = text_totals.layer)"
    )
    _keep_row_count(True)


def downgrade() -> None:
    _keep_row_count(False)
    # In place (SQLite 3.35+): a copy of the table, renamed, would have SQLite check the
    # triggers that name it while it is missing.
    op.execute("ALTER TABLE text_totals DROP COLUMN row_count")
