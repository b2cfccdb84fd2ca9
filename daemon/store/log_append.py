"""The hot path of every emit: appending signals to the log with the driver's own statements.

SQLAlchemy Core costs more CPU per row than the fsync it waits for (SPEC §12), so the insert
goes straight to sqlite3 or psycopg, inside the transaction SQLAlchemy began, with values
encoded exactly as the ``signals`` table's column types encode them (so Core reads them back
unchanged)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Connection

from daemon.core.signal import Signal

APPEND_LOCK_KEY = 0x63616D6269756D  # "cambium"
# An append that leaves work for a worker is announced on this channel when it commits
# (PostgreSQL): the fleet's daemons wake the workers of the receptors they own.
APPENDED_CHANNEL = "cambium_appended"

_COLUMNS = (
    "id, type, class, source_layer, source_id, workspace_id, intensity, decay_rate,"
    " cascade_potential, payload, affinity, emitted_at, stored_at, idempotency_key,"
    " correlation_id, causation_id"
)
_SQLITE_INSERT = (
    f"INSERT INTO signals ({_COLUMNS}) VALUES ({', '.join(['?'] * 16)})"
    " ON CONFLICT DO NOTHING RETURNING seq"
)
_POSTGRESQL_INSERT = (
    f"INSERT INTO signals ({_COLUMNS}) VALUES ({', '.join(['%s'] * 16)})"
    " ON CONFLICT DO NOTHING RETURNING seq"
)


def insert_signals(
    connection: Connection, signals: Sequence[tuple[Signal, datetime]]
) -> list[int | None]:
    """Insert each ``(signal, stored_at)`` unless its id or idempotency key is stored; each
    one's new sequence number, or None where it was skipped."""
    driver: Any = connection.connection.driver_connection
    if connection.dialect.name == "sqlite":
        cursor = driver.cursor()
        seqs: list[int | None] = []
        for signal, stored_at in signals:
            cursor.execute(_SQLITE_INSERT, _values(signal, stored_at, _sqlite_instant))
            row = cursor.fetchone()
            seqs.append(None if row is None else row[0])
        cursor.close()
        return seqs
    with driver.cursor() as cursor:
        # Appends take turns fleet-wide, so the sequence is commit order for every reader:
        # no cursor can pass a number whose transaction has yet to commit.
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK_KEY,))
        cursor.executemany(
            _POSTGRESQL_INSERT,
            [_values(signal, stored_at, _aware) for signal, stored_at in signals],
            returning=True,
        )
        seqs = []
        while True:
            row = cursor.fetchone()
            seqs.append(None if row is None else row[0])
            if not cursor.nextset():
                break
        return seqs


def _values(signal: Signal, stored_at: datetime, instant: Any) -> tuple[Any, ...]:
    return (
        signal.id,
        signal.type,
        signal.signal_class,
        signal.source_layer,
        signal.source_id,
        signal.workspace_id,
        signal.intensity,
        signal.decay_rate,
        signal.cascade_potential,
        json.dumps(signal.payload, ensure_ascii=False, separators=(",", ":")),
        json.dumps(signal.affinity, ensure_ascii=False, separators=(",", ":")),
        instant(signal.emitted_at),
        instant(stored_at),
        signal.idempotency_key,
        signal.correlation_id,
        signal.causation_id,
    )


def _sqlite_instant(value: datetime) -> str:
    # SQLAlchemy's SQLite DATETIME storage format, in UTC as UTCDateTime stores it.
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _aware(value: datetime) -> datetime:
    return value.astimezone(UTC)
