"""The substrate's files and the compost's learnings join the text index.

Two layers more in ``text_rows``: ``substrate`` (a row per file, its whole text) and
``compost`` (a row per learning of a compost file). On SQLite each gets its FTS5 table and
fts5vocab view as 0008 made them for the daily lines and the marks, and the triggers on
``text_rows`` are made again to feed all four; on PostgreSQL the ``tsvector`` column and its
GIN index hold every layer already. Both engines get the new layers' totals. No row is
written here: the daemon's start (or ``cambium index rebuild``) reads the files.

The statements that make a layer's FTS5 tables and the triggers repeat 0008's on purpose: a
migration is history, and must not change when a later one does.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BEFORE = ("daily", "marks")
ADDED = ("substrate", "compost")
# FTS5 sees exactly the stored terms: they are split on spaces and nothing else (as 0008).
TOKENIZE = "unicode61 remove_diacritics 0 categories 'L* N* Co M*'"


def _sqlite_layer(layer: str) -> list[str]:
    fts, vocab = f"text_fts_{layer}", f"text_vocab_{layer}"
    return [
        f"""CREATE VIRTUAL TABLE {fts} USING fts5(terms, content='text_rows',
            content_rowid='id', tokenize="{TOKENIZE}")""",
        f"CREATE VIRTUAL TABLE {vocab} USING fts5vocab({fts}, row)",
    ]


def _sqlite_triggers(layers: Sequence[str]) -> list[str]:
    """The triggers that keep each layer's FTS5 table and the totals in step with
    ``text_rows``."""
    return [
        "DROP TRIGGER text_rows_ai",
        "DROP TRIGGER text_rows_ad",
        "CREATE TRIGGER text_rows_ai AFTER INSERT ON text_rows BEGIN "
        + " ".join(
            f"INSERT INTO text_fts_{layer} (rowid, terms) SELECT new.id, new.terms"
            f" WHERE new.layer = '{layer}';"
            for layer in layers
        )
        + " UPDATE text_totals SET documents = documents + (new.length > 0),"
        " total_length = total_length + new.length WHERE layer = new.layer; END",
        "CREATE TRIGGER text_rows_ad AFTER DELETE ON text_rows BEGIN "
        + " ".join(
            f"INSERT INTO text_fts_{layer} (text_fts_{layer}, rowid, terms)"
            f" SELECT 'delete', old.id, old.terms WHERE old.layer = '{layer}';"
            for layer in layers
        )
        + " UPDATE text_totals SET documents = documents - (old.length > 0),"
        " total_length = total_length - old.length WHERE layer = old.layer; END",
    ]


def upgrade() -> None:
    op.bulk_insert(
        sa.table(
            "text_totals", sa.column("layer"), sa.column("documents"), sa.column("total_length")
        ),
        [{"layer": layer, "documents": 0, "total_length": 0} for layer in ADDED],
    )
    if op.get_bind().dialect.name == "sqlite":
        for statement in [
            *(s for layer in ADDED for s in _sqlite_layer(layer)),
            *_sqlite_triggers((*BEFORE, *ADDED)),
        ]:
            op.execute(statement)


def downgrade() -> None:
    # The rows go first, while the triggers still take them out of the FTS5 tables.
    added = ", ".join(f"'{layer}'" for layer in ADDED)
    op.execute(f"DELETE FROM text_rows WHERE layer IN ({added})")
    op.execute(f"DELETE FROM text_files WHERE layer IN ({added})")
    op.execute(f"DELETE FROM text_totals WHERE layer IN ({added})")
    if op.get_bind().dialect.name == "sqlite":
        for statement in _sqlite_triggers(BEFORE):
            op.execute(statement)
        for layer in ADDED:
            op.execute(f"DROP TABLE text_vocab_{layer}")
            op.execute(f"DROP TABLE text_fts_{layer}")
