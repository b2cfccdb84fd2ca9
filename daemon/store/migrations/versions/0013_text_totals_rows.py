"""``text_totals`` counts every row of its layer, kept by the same triggers as the rest.

The embedding worker reports how many documents (daily lines and marks) could be embedded.
It counted the rows of ``text_rows`` for that, once a pass and once per daily file it
embedded: 47-57 ms of CPU each at the 1.1M rows of three years of notes. ``documents``
counts only the rows that hold terms (what BM25 needs), and a line without a term (a line
of emoji) is still embedded, so the count is a column of its own: ``row_count``, filled
from the rows here, then kept by the triggers on ``text_rows`` (SQLite) or their function
(PostgreSQL) in the same statement that keeps the other totals.

The triggers (SQLite) and the function (PostgreSQL) are made again from their own stored
text, with the two updates of the totals extended: what they do to the FTS5 tables stays as
0012 made it.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# How the triggers' statements keep the total length (as 0008 and 0012 wrote them: ``new``
# in SQLite's triggers, ``NEW`` in PostgreSQL's function), and the row count kept beside it.
TOTAL_LENGTH = re.compile(r"total_length ([+-]) (?:new|old)\.length", re.IGNORECASE)
ROW_COUNT = re.compile(r", row_count = row_count [+-] 1")


def _counting(sql: str, row_count: bool) -> str:
    """``sql`` with its updates of the totals keeping the row count (or no longer)."""
    if row_count:
        return TOTAL_LENGTH.sub(lambda kept: f"{kept[0]}, row_count = row_count {kept[1]} 1", sql)
    return ROW_COUNT.sub("", sql)


def _keep_row_count(row_count: bool) -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for name in ("text_rows_ai", "text_rows_ad"):
            query = sa.text("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = :n")
            sql = bind.execute(query, {"n": name}).scalar_one()
            op.execute(f"DROP TRIGGER {name}")
            op.execute(_checked(sql, _counting(sql, row_count)))
    else:  # (its body alone: the statement must not name the schema, which the search path picks)
        query = sa.text("SELECT prosrc FROM pg_proc WHERE oid = 'text_rows_totals'::regproc")
        body = bind.execute(query).scalar_one()
        op.execute(
            "CREATE OR REPLACE FUNCTION text_rows_totals() RETURNS trigger LANGUAGE plpgsql"
            f" AS $${_checked(body, _counting(body, row_count))}$$"
        )


def _checked(before: str, after: str) -> str:
    if after == before:  # not what 0008 and 0012 made: stop (the revision rolls back)
        raise RuntimeError(f"text_totals: a trigger this revision does not know: {before}")
    return after


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
