"""The lean bus schema: fewer pages for each emit's commit to carry.

- ``signals`` loses its ``(type, seq)`` index. The workers read the log after their cursor
  in ``seq`` order (the table's own key) and skip the types they do not bind; a cursor
  that has nothing to deliver is moved to the head it read, so a receptor whose signals are
  rare never reads the same stretch twice.
- ``memory_marks``: one ``(workspace_id, subject, fingerprint)`` index serves the subject's
  prefix query and the repeat look-up (a fingerprint is a hash of the subject and the text,
  so the subject is always known beside it), instead of an index for each.
- On SQLite, ``receptor_cursors`` and ``text_pending`` become WITHOUT ROWID tables: the key
  is the row, so a look-up reads one b-tree and a new pending mark writes one page instead
  of two (the table and its key's index).

Every row is kept as it is: the cursors are copied whole, the pending marks too.

Revision ID: 0011
Revises: 0008
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CURSORS = """CREATE TABLE receptor_cursors (
    receptor VARCHAR(128) NOT NULL PRIMARY KEY,
    binds JSON NOT NULL,
    since INTEGER NOT NULL,
    position INTEGER NOT NULL,
    owner VARCHAR(256),
    lease_until DATETIME,
    updated_at DATETIME NOT NULL
)"""
CURSOR_COLUMNS = "receptor, binds, since, position, owner, lease_until, updated_at"
PENDING = "CREATE TABLE text_pending (mark_id VARCHAR(128) NOT NULL PRIMARY KEY)"


def _rebuild(table: str, create: str, columns: str) -> None:
    """SQLite: ``table`` made again by ``create``, every row copied back. Never renamed: the
    marks' triggers name ``text_pending``, and a rename would have them checked (or
    rewritten) while it is away."""
    op.execute(f"CREATE TABLE {table}_copy AS SELECT {columns} FROM {table}")
    op.execute(f"DROP TABLE {table}")
    op.execute(create)
    op.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {table}_copy")
    op.execute(f"DROP TABLE {table}_copy")


def upgrade() -> None:
    op.drop_index("ix_signals_type_seq", table_name="signals")
    op.drop_index("ix_memory_marks_workspace_fingerprint", table_name="memory_marks")
    op.drop_index("ix_memory_marks_workspace_subject", table_name="memory_marks")
    op.create_index(
        "ix_memory_marks_workspace_subject_fingerprint",
        "memory_marks",
        ["workspace_id", "subject", "fingerprint"],
        postgresql_ops={"subject": "text_pattern_ops"},
    )
    if op.get_bind().dialect.name == "sqlite":
        _rebuild("receptor_cursors", f"{CURSORS} WITHOUT ROWID", CURSOR_COLUMNS)
        _rebuild("text_pending", f"{PENDING} WITHOUT ROWID", "mark_id")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild("text_pending", PENDING, "mark_id")
        _rebuild("receptor_cursors", CURSORS, CURSOR_COLUMNS)
    op.drop_index("ix_memory_marks_workspace_subject_fingerprint", table_name="memory_marks")
    op.create_index(
        "ix_memory_marks_workspace_subject",
        "memory_marks",
        ["workspace_id", "subject"],
        postgresql_ops={"subject": "text_pattern_ops"},
    )
    op.create_index(
        "ix_memory_marks_workspace_fingerprint", "memory_marks", ["workspace_id", "fingerprint"]
    )
    op.create_index("ix_signals_type_seq", "signals", ["type", "seq"])
