"""The text index lives in the store: daily lines and marks as pre-stemmed terms.

``text_rows`` holds the terms; SQLite indexes them with an FTS5 table per layer (external
content: triggers on ``text_rows`` add and delete its entries, with FTS5's own ``'delete'``
so nothing of a deleted row stays in the index once it is optimized) and reads term
frequencies through fts5vocab; PostgreSQL with a generated ``tsvector`` (the ``simple``
configuration: the terms are stemmed already) and a GIN index. Triggers keep the per-layer
totals BM25 needs, and on ``memory_marks`` queue every new or changed mark for indexing and
delete the rows of a changed or deleted one in the same transaction (so ``memory.forget``
reaches the index at once). Existing marks are queued here; the daily files are read by
the daemon's start (or ``cambium index rebuild``), file by file, resumable.

Revision ID: 0008
Revises: 0006 (0007 once evidence time is merged)
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LAYERS = ("daily", "marks")
# FTS5 sees exactly the stored terms: they are split on spaces and nothing else.
TOKENIZE = "unicode61 remove_diacritics 0 categories 'L* N* Co M*'"

SQLITE_MARKS_TRIGGERS = (
    """CREATE TRIGGER memory_marks_text_ai AFTER INSERT ON memory_marks BEGIN
        INSERT OR IGNORE INTO text_pending (mark_id) VALUES (new.id);
    END""",
    """CREATE TRIGGER memory_marks_text_au AFTER UPDATE OF subject, observation ON memory_marks
    BEGIN
        DELETE FROM text_rows WHERE layer = 'marks' AND source = old.id;
        INSERT OR IGNORE INTO text_pending (mark_id) VALUES (new.id);
    END""",
    """CREATE TRIGGER memory_marks_text_ad AFTER DELETE ON memory_marks BEGIN
        DELETE FROM text_rows WHERE layer = 'marks' AND source = old.id;
        DELETE FROM text_pending WHERE mark_id = old.id;
    END""",
)

POSTGRES_FUNCTIONS = (
    """CREATE FUNCTION text_rows_totals() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            UPDATE text_totals SET documents = documents + (NEW.length > 0)::int,
                total_length = total_length + NEW.length WHERE layer = NEW.layer;
            RETURN NEW;
        END IF;
        UPDATE text_totals SET documents = documents - (OLD.length > 0)::int,
            total_length = total_length - OLD.length WHERE layer = OLD.layer;
        RETURN OLD;
    END $$""",
    """CREATE TRIGGER text_rows_totals AFTER INSERT OR DELETE ON text_rows
    FOR EACH ROW EXECUTE FUNCTION text_rows_totals()""",
    """CREATE FUNCTION memory_marks_text() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN
            DELETE FROM text_rows WHERE layer = 'marks' AND source = OLD.id;
        END IF;
        IF TG_OP = 'DELETE' THEN
            DELETE FROM text_pending WHERE mark_id = OLD.id;
            RETURN OLD;
        END IF;
        INSERT INTO text_pending (mark_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
        RETURN NEW;
    END $$""",
    """CREATE TRIGGER memory_marks_text
    AFTER INSERT OR DELETE OR UPDATE OF subject, observation ON memory_marks
    FOR EACH ROW EXECUTE FUNCTION memory_marks_text()""",
)


def _sqlite_layer(layer: str) -> list[str]:
    fts, vocab = f"text_fts_{layer}", f"text_vocab_{layer}"
    return [
        f"""CREATE VIRTUAL TABLE {fts} USING fts5(terms, content='text_rows',
            content_rowid='id', tokenize="{TOKENIZE}")""",
        f"CREATE VIRTUAL TABLE {vocab} USING fts5vocab({fts}, row)",
    ]


SQLITE_ROWS_TRIGGERS = (
    "CREATE TRIGGER text_rows_ai AFTER INSERT ON text_rows BEGIN "
    + " ".join(
        f"INSERT INTO text_fts_{layer} (rowid, terms) SELECT new.id, new.terms"
        f" WHERE new.layer = '{layer}';"
        for layer in LAYERS
    )
    + " UPDATE text_totals SET documents = documents + (new.length > 0),"
    " total_length = total_length + new.length WHERE layer = new.layer; END",
    "CREATE TRIGGER text_rows_ad AFTER DELETE ON text_rows BEGIN "
    + " ".join(
        f"INSERT INTO text_fts_{layer} (text_fts_{layer}, rowid, terms)"
        f" SELECT 'delete', old.id, old.terms WHERE old.layer = '{layer}';"
        for layer in LAYERS
    )
    + " UPDATE text_totals SET documents = documents - (old.length > 0),"
    " total_length = total_length - old.length WHERE layer = old.layer; END",
)


def upgrade() -> None:
    op.create_table(
        "text_rows",
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
        sa.Column("terms", sa.String(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.Column("digest", sa.BigInteger(), nullable=False),
        sa.Column("speaker", sa.String(128), nullable=True),
        sa.UniqueConstraint("layer", "source", "state", "part", name="uq_text_rows_place"),
    )
    op.create_table(
        "text_files",
        sa.Column("layer", sa.String(16), primary_key=True),
        sa.Column("source", sa.String(512), primary_key=True),
        sa.Column("state", sa.String(16), primary_key=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
    )
    totals = op.create_table(
        "text_totals",
        sa.Column("layer", sa.String(16), primary_key=True),
        sa.Column("documents", sa.BigInteger(), nullable=False),
        sa.Column("total_length", sa.BigInteger(), nullable=False),
    )
    op.bulk_insert(
        totals, [{"layer": layer, "documents": 0, "total_length": 0} for layer in LAYERS]
    )
    op.create_table("text_pending", sa.Column("mark_id", sa.String(128), primary_key=True))
    if op.get_bind().dialect.name == "sqlite":
        statements = [s for layer in LAYERS for s in _sqlite_layer(layer)]
        statements += [*SQLITE_ROWS_TRIGGERS, *SQLITE_MARKS_TRIGGERS]
    else:
        statements = [
            "ALTER TABLE text_rows ADD COLUMN tsv tsvector"
            " GENERATED ALWAYS AS (to_tsvector('simple', terms)) STORED",
            "CREATE INDEX ix_text_rows_tsv ON text_rows USING gin (tsv)",
            *POSTGRES_FUNCTIONS,
        ]
    for statement in statements:
        op.execute(statement)
    op.execute(
        "INSERT INTO text_pending (mark_id) SELECT id FROM memory_marks WHERE state <> 'forgotten'"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for trigger in ("memory_marks_text_ai", "memory_marks_text_au", "memory_marks_text_ad"):
            op.execute(f"DROP TRIGGER {trigger}")
        for layer in LAYERS:
            op.execute(f"DROP TABLE text_vocab_{layer}")
            op.execute(f"DROP TABLE text_fts_{layer}")
    else:
        op.execute("DROP TRIGGER memory_marks_text ON memory_marks")
        op.execute("DROP FUNCTION memory_marks_text()")
    for table in ("text_pending", "text_totals", "text_files", "text_rows"):
        op.drop_table(table)
    if op.get_bind().dialect.name != "sqlite":
        op.execute("DROP FUNCTION text_rows_totals()")
