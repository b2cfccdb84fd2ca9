"""A signal as a row of the ``signals`` table: the columns it is written to, in the table's
order, the columns it is read back from, and the row read back as a
:class:`~daemon.core.signal.Signal`. Shared by the log's repository and the fast path."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, func, select
from sqlalchemy.engine import Connection

from daemon.core.signal import Signal
from daemon.store.tables import SignalTable

signals = SignalTable.__table__  # type: ignore[attr-defined]

# What an append writes: every column but the sequence, which the store assigns.
WRITTEN_COLUMNS: tuple[str, ...] = tuple(c.name for c in signals.c if c.name != "seq")
# What a delivery reads: the signal itself and its place in the log.
READ_COLUMNS = [c for c in signals.c if c.name != "stored_at"]


def last_seq(connection: Connection) -> int:
    """The last sequence number appended (0 for an empty log)."""
    return int(connection.execute(select(func.coalesce(func.max(signals.c.seq), 0))).one()[0])


def signal_from_row(row: Row[Any]) -> Signal:
    """Rebuild a stored signal without validating it again (it was validated on the way in)."""
    m = row._mapping
    return Signal.model_construct(
        id=m["id"],
        type=m["type"],
        signal_class=m["class"],
        source_layer=m["source_layer"],
        source_id=m["source_id"],
        workspace_id=m["workspace_id"],
        intensity=m["intensity"],
        decay_rate=m["decay_rate"],
        cascade_potential=m["cascade_potential"],
        payload=m["payload"],
        affinity=m["affinity"],
        emitted_at=m["emitted_at"],
        idempotency_key=m["idempotency_key"],
        correlation_id=m["correlation_id"],
        causation_id=m["causation_id"],
    )
