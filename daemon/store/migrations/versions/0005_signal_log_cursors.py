"""The bus as a log with cursors: ``signals`` gains ``seq`` (commit order), per-delivery rows
become one cursor per receptor plus rows for the exceptions (failed, dead, checkpointed,
delivered after failing).

Every signal is kept, in the order it was stored. Each receptor's cursor is set at the last
signal it settled (delivered or dead); a delivery still pending below that point (a dead one
retried by hand, say) keeps a ``pending`` row and is delivered again, as it would have been.
Attempts, errors, checkpoints and dead letters move over unchanged.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INSTANT = sa.DateTime(timezone=True)
NAME = sa.String(128)
SEQUENCE = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
SIGNAL_COLUMNS = (
    "id, type, class, source_layer, source_id, workspace_id, intensity, decay_rate,"
    " cascade_potential, payload, affinity, emitted_at, stored_at, idempotency_key,"
    " correlation_id, causation_id"
)


def upgrade() -> None:
    op.create_table(
        "signal_log",
        sa.Column("seq", SEQUENCE, primary_key=True, autoincrement=True),
        sa.Column("id", NAME, nullable=False),
        sa.Column("type", NAME, nullable=False),
        sa.Column("class", NAME, nullable=False),
        sa.Column("source_layer", NAME, nullable=False),
        sa.Column("source_id", NAME, nullable=False),
        sa.Column("workspace_id", NAME, nullable=False),
        sa.Column("intensity", sa.Float(), nullable=False),
        sa.Column("decay_rate", sa.Float(), nullable=False),
        sa.Column("cascade_potential", sa.Boolean(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("affinity", sa.JSON(), nullable=False),
        sa.Column("emitted_at", INSTANT, nullable=False),
        sa.Column("stored_at", INSTANT, nullable=False),
        sa.Column("idempotency_key", sa.String(256), nullable=True),
        sa.Column("correlation_id", NAME, nullable=True),
        sa.Column("causation_id", NAME, nullable=True),
        sa.UniqueConstraint("id", name="uq_signals_id"),
    )
    # Wave 1 had no sequence: its order was the time stored, then the first delivery row.
    op.execute(
        f"INSERT INTO signal_log (seq, {SIGNAL_COLUMNS})"
        f" SELECT ROW_NUMBER() OVER (ORDER BY s.stored_at, first_delivery, s.id), {SIGNAL_COLUMNS}"
        f" FROM (SELECT signals.*, (SELECT min(d.id) FROM deliveries d"
        f"  WHERE d.signal_id = signals.id) AS first_delivery FROM signals) s"
    )
    op.create_table(
        "receptor_cursors",
        sa.Column("receptor", NAME, primary_key=True),
        sa.Column("binds", sa.JSON(), nullable=False),
        sa.Column("since", SEQUENCE, nullable=False),
        sa.Column("position", SEQUENCE, nullable=False),
        sa.Column("owner", sa.String(256), nullable=True),
        sa.Column("lease_until", INSTANT, nullable=True),
        sa.Column("updated_at", INSTANT, nullable=False),
    )
    op.create_table(
        "delivery_failures",
        sa.Column("receptor", NAME, primary_key=True),
        sa.Column("seq", SEQUENCE, primary_key=True, autoincrement=False),
        sa.Column("signal_id", NAME, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.String(), nullable=True),
        sa.Column("next_attempt_at", INSTANT, nullable=True),
        sa.Column("checkpoint", sa.JSON(), nullable=True),
        sa.Column("updated_at", INSTANT, nullable=False),
    )
    _move_deliveries(op.get_bind())
    op.drop_index("ix_deliveries_status", table_name="deliveries")
    op.drop_index("ix_deliveries_receptor_status_id", table_name="deliveries")
    op.drop_table("deliveries")
    op.drop_index("ix_signals_type_stored", table_name="signals")
    op.drop_index("ix_signals_stored_at", table_name="signals")
    op.drop_table("signals")
    op.rename_table("signal_log", "signals")
    op.create_index(
        "uq_signals_idempotency_key",
        "signals",
        ["idempotency_key"],
        unique=True,
        sqlite_where=sa.text("idempotency_key IS NOT NULL"),
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )
    op.create_index("ix_signals_type_seq", "signals", ["type", "seq"])
    op.create_index("ix_delivery_failures_status", "delivery_failures", ["status"])
    op.create_index("ix_delivery_failures_signal_id", "delivery_failures", ["signal_id"])
    if op.get_bind().dialect.name == "postgresql":
        # Explicit values were inserted; the sequence continues after them.
        op.execute(
            "SELECT setval(pg_get_serial_sequence('signals', 'seq'),"
            " COALESCE((SELECT max(seq) FROM signals), 0) + 1, false)"
        )


def _move_deliveries(connection: sa.Connection) -> None:
    """One cursor per receptor, and a row for each delivery that is not simply "delivered
    at or below the cursor" or "pending above it"."""
    deliveries = connection.execute(
        sa.text(
            "SELECT d.receptor, l.seq, l.type, d.signal_id, d.status, d.attempts, d.last_error,"
            " d.next_attempt_at, d.checkpoint, d.updated_at, d.delivered_at"
            " FROM deliveries d JOIN signal_log l ON l.id = d.signal_id ORDER BY l.seq"
        ).columns(
            checkpoint=sa.JSON(),
            next_attempt_at=INSTANT,
            updated_at=INSTANT,
            delivered_at=INSTANT,
        )
    ).all()
    by_receptor: dict[str, list[sa.Row[tuple[object, ...]]]] = {}
    for row in deliveries:
        by_receptor.setdefault(row.receptor, []).append(row)
    cursors = sa.table(
        "receptor_cursors",
        sa.column("receptor"),
        sa.column("binds", sa.JSON()),
        sa.column("since"),
        sa.column("position"),
        sa.column("updated_at", INSTANT),
    )
    failures = sa.table(
        "delivery_failures",
        *(
            sa.column(name)
            for name in ("receptor", "seq", "signal_id", "status", "attempts", "last_error")
        ),
        sa.column("next_attempt_at", INSTANT),
        sa.column("checkpoint", sa.JSON()),
        sa.column("updated_at", INSTANT),
    )
    for receptor, rows in by_receptor.items():
        settled = [r.seq for r in rows if r.status != "pending"]
        position = max(settled) if settled else rows[0].seq - 1
        connection.execute(
            cursors.insert().values(
                receptor=receptor,
                binds=sorted({r.type for r in rows}),
                since=rows[0].seq - 1,  # what it never had a delivery for is not its own
                position=position,
                updated_at=max(r.updated_at for r in rows),
            )
        )
        exceptions = [
            {
                "receptor": receptor,
                "seq": r.seq,
                "signal_id": r.signal_id,
                "status": r.status,
                "attempts": r.attempts,
                "last_error": r.last_error,
                "next_attempt_at": r.next_attempt_at,
                "checkpoint": r.checkpoint,
                "updated_at": r.delivered_at or r.updated_at,
            }
            for r in rows
            if r.status == "dead"
            or (r.status == "pending" and (r.seq <= position or r.attempts or r.checkpoint))
            or (r.status == "delivered" and (r.attempts > 1 or r.checkpoint))
        ]
        if exceptions:
            connection.execute(failures.insert(), exceptions)


def downgrade() -> None:
    raise NotImplementedError(
        "0005 cannot be undone: wave 1 kept a row per delivery, the log keeps a cursor."
        " Restore the copy of the database taken before upgrading (cambium export)."
    )
