"""The signal log: the ``signals`` and ``deliveries`` tables, the bus's durable record.

:class:`SignalLog` names every operation on them once and returns typed records; the bus,
the API, the CLI and the tests call its methods inside a transaction the
:class:`~daemon.store.engine.Store` hands them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, bindparam, exists, func, insert, select, update
from sqlalchemy.engine import Connection

from daemon.core.clock import iso
from daemon.core.signal import Signal
from daemon.store.sql import insert_ignoring_duplicates, text_for_store, with_instants
from daemon.store.tables import DeliveryTable, SignalTable

signals = SignalTable.__table__  # type: ignore[attr-defined]
deliveries = DeliveryTable.__table__  # type: ignore[attr-defined]

DELIVERY_STATES = ("pending", "delivered", "dead")
MAX_ERROR_CHARS = 4000


@dataclass(frozen=True)
class Stored:
    """What an emit returns: the signal id, and whether it was already stored."""

    id: str
    duplicate: bool


@dataclass(frozen=True)
class PendingDelivery:
    id: int
    receptor: str
    attempts: int
    checkpoint: dict[str, Any] | None
    signal: Signal


@dataclass(frozen=True)
class NewSignal:
    """A validated signal on its way into the store, with the receptors it is routed to."""

    signal: Signal
    receptors: list[str]
    stored_at: datetime


@dataclass(frozen=True)
class DeliveryState:
    """Where one receptor is with one signal."""

    receptor: str
    status: str  # pending | delivered | dead
    attempts: int
    last_error: str | None
    next_attempt_at: datetime | None = None
    delivered_at: datetime | None = None

    def to_json(self, *, full: bool = True) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "receptor": self.receptor,
            "status": self.status,
            "attempts": self.attempts,
            "last_error": self.last_error,
        }
        if full:
            shown["next_attempt_at"] = _iso_or_none(self.next_attempt_at)
            shown["delivered_at"] = _iso_or_none(self.delivered_at)
        return shown


@dataclass(frozen=True)
class StoredSignal:
    """A signal as the log holds it, with each bound receptor's delivery state."""

    signal: Signal
    stored_at: datetime
    deliveries: list[DeliveryState] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return self.signal.to_json_dict() | {
            "stored_at": iso(self.stored_at),
            "deliveries": [d.to_json() for d in self.deliveries],
        }


@dataclass(frozen=True)
class SignalSummary:
    """One line of the log's listing."""

    id: str
    type: str
    source_id: str
    workspace_id: str
    emitted_at: datetime
    stored_at: datetime
    deliveries: list[DeliveryState]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "source_id": self.source_id,
            "workspace_id": self.workspace_id,
            "emitted_at": iso(self.emitted_at),
            "stored_at": iso(self.stored_at),
            "deliveries": [d.to_json(full=False) for d in self.deliveries],
        }


@dataclass(frozen=True)
class DeliveryCounts:
    """Open deliveries: waiting to be delivered, and given up on."""

    pending: int = 0
    dead: int = 0


def _iso_or_none(value: datetime | None) -> str | None:
    return None if value is None else iso(value)


_BY_IDEMPOTENCY_KEY = select(signals.c.id, signals.c.idempotency_key).where(
    signals.c.idempotency_key.in_(bindparam("keys", expanding=True))
)
_INSERT_DELIVERIES = insert(deliveries)

_PENDING = (
    select(
        deliveries.c.id.label("delivery_id"),
        deliveries.c.attempts,
        deliveries.c.checkpoint,
        *[c for c in signals.c if c.name != "stored_at"],
    )
    .join(signals, signals.c.id == deliveries.c.signal_id)
    .where(deliveries.c.receptor == bindparam("receptor"), deliveries.c.status == "pending")
    .order_by(deliveries.c.id)
    .limit(bindparam("limit"))
)

_MARK_DELIVERED = (
    update(deliveries)
    .where(deliveries.c.id == bindparam("delivery_id"), deliveries.c.status == "pending")
    .values(
        status="delivered",
        attempts=bindparam("attempt"),
        last_error=None,
        next_attempt_at=None,
        delivered_at=bindparam("now"),
        updated_at=bindparam("now"),
    )
)

_MARK_MANY_DELIVERED = (
    update(deliveries)
    .where(
        deliveries.c.id.in_(bindparam("delivery_ids", expanding=True)),
        deliveries.c.status == "pending",
    )
    .values(
        status="delivered",
        attempts=deliveries.c.attempts + 1,
        last_error=None,
        next_attempt_at=None,
        delivered_at=bindparam("now"),
        updated_at=bindparam("now"),
    )
)

_DELIVERY_COLUMNS = (
    deliveries.c.receptor,
    deliveries.c.status,
    deliveries.c.attempts,
    deliveries.c.last_error,
    deliveries.c.next_attempt_at,
    deliveries.c.delivered_at,
)

_OPEN_COUNTS = (
    select(deliveries.c.status, func.count())
    .where(deliveries.c.status.in_(("pending", "dead")))
    .group_by(deliveries.c.status)
)


class SignalLog:
    """Every operation on the signal log, inside the transaction of ``connection``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    # -- appending ------------------------------------------------------------------------

    def append(self, new: Sequence[NewSignal]) -> list[Stored]:
        """Store each signal and one pending delivery per receptor, unless its id or
        idempotency key is already stored (or came earlier in ``new``): then store nothing
        and name the first one. One multi-row INSERT that skips conflicts, for group commit."""
        connection = self.connection
        statement = insert_ignoring_duplicates(signals, connection.dialect.name).returning(
            signals.c.id
        )
        rows = [signal_row(n.signal, n.stored_at) for n in new]
        inserted = set(connection.execute(statement, rows).scalars())
        skipped_keys = [
            n.signal.idempotency_key
            for n in new
            if n.signal.id not in inserted and n.signal.idempotency_key is not None
        ]
        first_with_key: dict[str, str] = {}
        if skipped_keys:
            for row in connection.execute(_BY_IDEMPOTENCY_KEY, {"keys": skipped_keys}):
                first_with_key[row.idempotency_key] = row.id
        results: list[Stored] = []
        delivery_rows: list[dict[str, Any]] = []
        for n in new:
            signal = n.signal
            if signal.id not in inserted:
                key = signal.idempotency_key
                results.append(Stored(first_with_key.get(key or "", signal.id), duplicate=True))
                continue
            inserted.discard(signal.id)  # a repeat of this id later in the batch is a duplicate
            results.append(Stored(signal.id, duplicate=False))
            delivery_rows.extend(
                {
                    "signal_id": signal.id,
                    "receptor": receptor,
                    "status": "pending",
                    "attempts": 0,
                    "created_at": n.stored_at,
                    "updated_at": n.stored_at,
                }
                for receptor in n.receptors
            )
        if delivery_rows:
            connection.execute(_INSERT_DELIVERIES, delivery_rows)
        return results

    # -- delivering -----------------------------------------------------------------------

    def pending(self, receptor: str, limit: int) -> list[PendingDelivery]:
        """The receptor's pending deliveries in persisted order."""
        rows = self.connection.execute(_PENDING, {"receptor": receptor, "limit": limit}).all()
        return [
            PendingDelivery(
                id=row.delivery_id,
                receptor=receptor,
                attempts=row.attempts,
                checkpoint=row.checkpoint,
                signal=signal_from_row(row),
            )
            for row in rows
        ]

    def mark_delivered(self, delivery_id: int, attempt: int, now: datetime) -> bool:
        """Mark a pending delivery done; False if it was not pending (someone got there
        first)."""
        result = self.connection.execute(
            _MARK_DELIVERED, {"delivery_id": delivery_id, "attempt": attempt, "now": now}
        )
        return result.rowcount == 1

    def mark_many_delivered(self, delivery_ids: list[int], now: datetime) -> int:
        """Mark pending deliveries done, each counting one more attempt; how many were
        pending."""
        result = self.connection.execute(
            _MARK_MANY_DELIVERED, {"delivery_ids": delivery_ids, "now": now}
        )
        return result.rowcount

    def record_failure(
        self, delivery_id: int, attempt: int, error: str, now: datetime, retry_at: datetime | None
    ) -> None:
        """Count a failed attempt; with no ``retry_at`` the delivery is dead. The error is
        stored in a form every store accepts (no NUL, bounded)."""
        self.connection.execute(
            update(deliveries)
            .where(deliveries.c.id == delivery_id, deliveries.c.status == "pending")
            .values(
                status="pending" if retry_at is not None else "dead",
                attempts=attempt,
                last_error=text_for_store(error, MAX_ERROR_CHARS),
                next_attempt_at=retry_at,
                updated_at=now,
            )
        )

    def save_checkpoint(self, delivery_id: int, checkpoint: dict[str, Any], now: datetime) -> None:
        self.connection.execute(
            update(deliveries)
            .where(deliveries.c.id == delivery_id)
            .values(checkpoint=checkpoint, updated_at=now)
        )

    def revive_dead(self, signal_id: str, now: datetime, receptor: str | None = None) -> list[str]:
        """Make dead deliveries of a signal pending again (attempts reset); the receptors
        revived."""
        condition = and_(deliveries.c.signal_id == signal_id, deliveries.c.status == "dead")
        if receptor is not None:
            condition = and_(condition, deliveries.c.receptor == receptor)
        revived = list(
            self.connection.execute(select(deliveries.c.receptor).where(condition)).scalars()
        )
        if revived:
            self.connection.execute(
                update(deliveries)
                .where(condition)
                .values(status="pending", attempts=0, next_attempt_at=None, updated_at=now)
            )
        return revived

    # -- reading --------------------------------------------------------------------------

    def get(self, signal_id: str) -> StoredSignal | None:
        """A stored signal with its deliveries."""
        row = self.connection.execute(select(signals).where(signals.c.id == signal_id)).first()
        if row is None:
            return None
        found = self.connection.execute(
            select(*_DELIVERY_COLUMNS)
            .where(deliveries.c.signal_id == signal_id)
            .order_by(deliveries.c.id)
        )
        return StoredSignal(
            signal=signal_from_row(row),
            stored_at=row.stored_at,
            deliveries=[DeliveryState(**d._mapping) for d in found],
        )

    def status(self, signal_id: str) -> dict[str, str]:
        """Receptor -> delivery status for one signal."""
        rows = self.connection.execute(
            select(deliveries.c.receptor, deliveries.c.status).where(
                deliveries.c.signal_id == signal_id
            )
        )
        return {row.receptor: row.status for row in rows}

    def listing(
        self, *, status: str | None = None, signal_type: str | None = None, limit: int = 50
    ) -> list[SignalSummary]:
        """Newest first. ``status`` is a delivery status, or ``unrouted`` (no deliveries)."""
        query = select(
            signals.c.id,
            signals.c.type,
            signals.c.source_id,
            signals.c.workspace_id,
            signals.c.emitted_at,
            signals.c.stored_at,
        )
        has_delivery = exists().where(deliveries.c.signal_id == signals.c.id)
        if status == "unrouted":
            query = query.where(~has_delivery)
        elif status is not None:
            query = query.where(
                exists().where(
                    deliveries.c.signal_id == signals.c.id, deliveries.c.status == status
                )
            )
        if signal_type is not None:
            query = query.where(signals.c.type == signal_type)
        rows = self.connection.execute(
            query.order_by(signals.c.stored_at.desc(), signals.c.id.desc()).limit(limit)
        ).all()
        by_signal: dict[str, list[DeliveryState]] = {row.id: [] for row in rows}
        if by_signal:
            for d in self.connection.execute(
                select(deliveries.c.signal_id, *_DELIVERY_COLUMNS[:4])
                .where(deliveries.c.signal_id.in_(list(by_signal)))
                .order_by(deliveries.c.id)
            ):
                by_signal[d.signal_id].append(
                    DeliveryState(d.receptor, d.status, d.attempts, d.last_error)
                )
        return [SignalSummary(**row._mapping, deliveries=by_signal[row.id]) for row in rows]

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
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            for row in self.connection.execute(query.where(signals.c.id.in_(chunk))):
                found[row.id] = row.payload
        return list(found.items())

    def replace_payloads(self, signal_ids: Sequence[str], payload: dict[str, Any]) -> None:
        """Overwrite these signals' payloads (``memory.forget``); the rows stay in the log."""
        for start in range(0, len(signal_ids), 500):
            self.connection.execute(
                update(signals)
                .where(signals.c.id.in_(signal_ids[start : start + 500]))
                .values(payload=payload)
            )

    def all_rows(self) -> list[dict[str, Any]]:
        """Every signal as its column mapping, in log order (for export)."""
        query = select(signals).order_by(signals.c.stored_at, signals.c.id)
        return [dict(r._mapping) for r in self.connection.execute(query)]

    def restore(self, rows: Sequence[dict[str, Any]]) -> int:
        """Insert exported signals whose id (or idempotency key) is not stored yet, without
        deliveries: they are history, not work to do (import). How many were new."""
        if not rows:
            return 0
        statement = insert_ignoring_duplicates(signals, self.connection.dialect.name)
        inserted = self.connection.execute(
            statement.returning(signals.c.id), with_instants(signals, rows)
        )
        return len(list(inserted.scalars()))

    def open_counts(self) -> DeliveryCounts:
        """How many deliveries are pending and dead. Delivered ones are not counted: they
        grow without bound, and the status index lets this read only the open ones."""
        counts: dict[str, int] = {status: n for status, n in self.connection.execute(_OPEN_COUNTS)}
        return DeliveryCounts(pending=counts.get("pending", 0), dead=counts.get("dead", 0))


def signal_row(signal: Signal, stored_at: datetime) -> dict[str, Any]:
    return {
        "id": signal.id,
        "type": signal.type,
        "class": signal.signal_class,
        "source_layer": signal.source_layer,
        "source_id": signal.source_id,
        "workspace_id": signal.workspace_id,
        "intensity": signal.intensity,
        "decay_rate": signal.decay_rate,
        "cascade_potential": signal.cascade_potential,
        "payload": signal.payload,
        "affinity": signal.affinity,
        "emitted_at": signal.emitted_at,
        "stored_at": stored_at,
        "idempotency_key": signal.idempotency_key,
        "correlation_id": signal.correlation_id,
        "causation_id": signal.causation_id,
    }


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
