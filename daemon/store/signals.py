"""The signal log: the ``signals`` table, append-only, ``seq`` in commit order.

:class:`SignalLog` is the one repository the bus, the API, the CLI and the tests use for the
log, inside a transaction the :class:`~daemon.store.engine.Store` hands them: appending and
reading signals here, with the receptors' cursors (:mod:`daemon.store.cursors`), their
deliveries (:mod:`daemon.store.deliveries`) and the fleet's leases
(:mod:`daemon.store.cursor_leases`) as the parts it is made of. Appending, the hot path, goes
through the driver's own prepared statements (:mod:`daemon.store.fast_path`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from daemon.core.clock import iso
from daemon.core.signal import Signal
from daemon.store.cursor_leases import CursorLeases
from daemon.store.deliveries import Deliveries, DeliveryState
from daemon.store.errors import DeliveriesPending
from daemon.store.fast_path import APPENDED_CHANNEL, insert_signals
from daemon.store.signal_rows import last_seq, signal_from_row, signals
from daemon.store.sql import in_chunks, insert_ignoring_duplicates, streamed_rows, with_instants


@dataclass(frozen=True)
class Stored:
    """What an emit returns: the signal id, whether it was already stored, and (when new)
    its place in the log."""

    id: str
    duplicate: bool
    seq: int | None = None


@dataclass(frozen=True)
class NewSignal:
    """A validated signal on its way into the store."""

    signal: Signal
    stored_at: datetime


@dataclass(frozen=True)
class StoredSignal:
    """A signal as the log holds it, with each bound receptor's delivery state."""

    signal: Signal
    stored_at: datetime
    seq: int
    deliveries: list[DeliveryState] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return self.signal.to_json_dict() | {
            "seq": self.seq,
            "stored_at": iso(self.stored_at),
            "deliveries": [d.to_json() for d in self.deliveries],
        }


@dataclass(frozen=True)
class SignalSummary:
    """One line of the log's listing."""

    id: str
    seq: int
    type: str
    source_id: str
    workspace_id: str
    emitted_at: datetime
    stored_at: datetime
    deliveries: list[DeliveryState]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "seq": self.seq,
            "type": self.type,
            "source_id": self.source_id,
            "workspace_id": self.workspace_id,
            "emitted_at": iso(self.emitted_at),
            "stored_at": iso(self.stored_at),
            "deliveries": [d.to_json(full=False) for d in self.deliveries],
        }


_SUMMARY_COLUMNS = (
    signals.c.id,
    signals.c.seq,
    signals.c.type,
    signals.c.source_id,
    signals.c.workspace_id,
    signals.c.emitted_at,
    signals.c.stored_at,
)


class SignalLog(Deliveries, CursorLeases):
    """Every operation on the signal log, inside the transaction of ``connection``."""

    # -- appending ------------------------------------------------------------------------

    def append(self, new: Sequence[NewSignal]) -> list[Stored]:
        """Append each signal unless its id or idempotency key is already stored (or came
        earlier in ``new``): then store nothing and name the first one."""
        seqs = insert_signals(self.connection, [(n.signal, n.stored_at) for n in new])
        skipped_keys = [
            n.signal.idempotency_key
            for n, seq in zip(new, seqs, strict=True)
            if seq is None and n.signal.idempotency_key is not None
        ]
        first_with_key: dict[str, str] = {}
        if skipped_keys:
            query = select(signals.c.idempotency_key, signals.c.id).where(
                signals.c.idempotency_key.in_(skipped_keys)
            )
            first_with_key = {key: id_ for key, id_ in self.connection.execute(query)}
        return [
            Stored(n.signal.id, duplicate=False, seq=seq)
            if seq is not None
            else Stored(first_with_key.get(n.signal.idempotency_key or "", n.signal.id), True)
            for n, seq in zip(new, seqs, strict=True)
        ]

    def announce_append(self) -> None:
        """On PostgreSQL, tell the fleet (when this transaction commits) that the log has
        work for its workers; elsewhere there is no one else to tell."""
        if self.connection.dialect.name == "postgresql":
            self.connection.exec_driver_sql(f"NOTIFY {APPENDED_CHANNEL}")

    def head(self) -> int:
        """The last sequence number appended (0 for an empty log)."""
        return last_seq(self.connection)

    # -- reading --------------------------------------------------------------------------

    def get(self, signal_id: str) -> StoredSignal | None:
        """A stored signal with its deliveries."""
        row = self.connection.execute(select(signals).where(signals.c.id == signal_id)).first()
        if row is None:
            return None
        states = self._states([(row.seq, row.type)])
        return StoredSignal(
            signal=signal_from_row(row),
            stored_at=row.stored_at,
            seq=row.seq,
            deliveries=states[row.seq],
        )

    def status(self, signal_id: str) -> dict[str, str]:
        """Receptor -> delivery status for one signal."""
        found = self.get(signal_id)
        return {} if found is None else {d.receptor: d.status for d in found.deliveries}

    def listing(
        self,
        *,
        status: str | None = None,
        signal_type: str | None = None,
        source: str | None = None,
        limit: int = 50,
    ) -> list[SignalSummary]:
        """Newest first. ``status`` is a delivery status, or ``unrouted`` (no receptor's)."""
        query = select(*_SUMMARY_COLUMNS)
        if status is not None:
            query = query.where(self._having_status(status))
        if signal_type is not None:
            query = query.where(signals.c.type == signal_type)
        if source is not None:
            query = query.where(signals.c.source_id == source)
        rows = self.connection.execute(query.order_by(signals.c.seq.desc()).limit(limit)).all()
        states = self._states([(row.seq, row.type) for row in rows])
        return [SignalSummary(**row._mapping, deliveries=states[row.seq]) for row in rows]

    def types(self) -> list[str]:
        """Every signal type stored, each once, in order."""
        return sorted(self.connection.execute(select(signals.c.type).distinct()).scalars())

    def sources(self) -> list[str]:
        """Every source that emitted a stored signal, each once, in order."""
        return sorted(self.connection.execute(select(signals.c.source_id).distinct()).scalars())

    # -- governance and archives ----------------------------------------------------------

    def payloads(
        self, workspace: str, types: Sequence[str], ids: Sequence[str]
    ) -> list[tuple[str, dict[str, Any]]]:
        """``(id, payload)`` of the workspace's signals of ``types``, and of the signals
        ``ids`` (any type), each once."""
        found: dict[str, dict[str, Any]] = {}
        query = select(signals.c.id, signals.c.payload)
        for row in self.connection.execute(
            query.where(signals.c.workspace_id == workspace, signals.c.type.in_(types))
        ):
            found[row.id] = row.payload
        for chunk in in_chunks(ids):
            for row in self.connection.execute(query.where(signals.c.id.in_(chunk))):
                found[row.id] = row.payload
        return list(found.items())

    def replace_payloads(self, signal_ids: Sequence[str], payload: dict[str, Any]) -> None:
        """Overwrite these signals' payloads (``memory.forget``); the rows stay in the log."""
        for chunk in in_chunks(signal_ids):
            self.connection.execute(
                update(signals).where(signals.c.id.in_(chunk)).values(payload=payload)
            )

    def all_rows(self) -> Iterator[dict[str, Any]]:
        """Every signal as its column mapping, in log order (for export)."""
        query = select(*[c for c in signals.c if c.name != "seq"]).order_by(signals.c.seq)
        return streamed_rows(self.connection, query)

    def restore(self, rows: Sequence[dict[str, Any]], now: datetime) -> int:
        """Append exported signals whose id (or idempotency key) is not stored yet, as history
        rather than work to do (import): every receptor counts them as delivered. How many
        were new. Raises :class:`DeliveriesPending` (nothing written) while any receptor
        has signals left to deliver."""
        if not rows:
            return 0
        waiting = self.open_counts().pending
        if waiting:
            # History goes after the log; with work still after a cursor, it could only be
            # told from that work by a row per signal and receptor.
            raise DeliveriesPending(
                f"{waiting} deliveries are still pending: start the daemon and let them be"
                " delivered (cambium status), then import"
            )
        statement = insert_ignoring_duplicates(signals, self.connection.dialect.name)
        given = [
            {k: v for k, v in row.items() if k != "seq"} for row in with_instants(signals, rows)
        ]
        before = self.head()
        inserted = list(
            self.connection.execute(statement.returning(signals.c.seq), given).scalars()
        )
        if inserted:
            self._count_as_delivered(before, self.head(), now)
        return len(inserted)

    def _count_as_delivered(self, after: int, through: int, now: datetime) -> None:
        """Signals ``after < seq <= through`` are history for every receptor: each cursor,
        at or past ``after`` (nothing was pending), moves past them."""
        for cursor in self.cursors():
            self.advance(cursor.receptor, cursor.position, max(cursor.position, through), now)
