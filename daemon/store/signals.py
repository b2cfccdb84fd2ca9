"""Queries on the ``signals`` and ``deliveries`` tables: the bus's durable log."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, exists, func, insert, select, update
from sqlalchemy.engine import Connection

from daemon.models.signal import Signal
from daemon.models.tables import Delivery, SignalRecord

signals = SignalRecord.__table__  # type: ignore[attr-defined]
deliveries = Delivery.__table__  # type: ignore[attr-defined]

DELIVERY_STATUSES = ("pending", "delivered", "dead")


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


def insert_signal(
    connection: Connection, signal: Signal, receptors: list[str], stored_at: datetime
) -> Stored:
    """Store ``signal`` and one pending delivery per receptor, unless its idempotency key
    (or its id) is already stored, in which case store nothing and name the first one."""
    if signal.idempotency_key is not None:
        existing = connection.execute(
            select(signals.c.id).where(signals.c.idempotency_key == signal.idempotency_key)
        ).scalar()
        if existing is not None:
            return Stored(existing, duplicate=True)
    if connection.execute(select(signals.c.id).where(signals.c.id == signal.id)).first():
        return Stored(signal.id, duplicate=True)
    connection.execute(insert(signals), [signal_row(signal, stored_at)])
    if receptors:
        connection.execute(
            insert(deliveries),
            [
                {
                    "signal_id": signal.id,
                    "receptor": receptor,
                    "status": "pending",
                    "attempts": 0,
                    "created_at": stored_at,
                    "updated_at": stored_at,
                }
                for receptor in receptors
            ],
        )
    return Stored(signal.id, duplicate=False)


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


_SIGNAL_COLUMNS = [c for c in signals.c if c.name != "stored_at"]


def pending_deliveries(connection: Connection, receptor: str, limit: int) -> list[PendingDelivery]:
    """The receptor's pending deliveries in persisted order."""
    rows = connection.execute(
        select(
            deliveries.c.id.label("delivery_id"),
            deliveries.c.attempts,
            deliveries.c.checkpoint,
            *_SIGNAL_COLUMNS,
        )
        .join(signals, signals.c.id == deliveries.c.signal_id)
        .where(deliveries.c.receptor == receptor, deliveries.c.status == "pending")
        .order_by(deliveries.c.id)
        .limit(limit)
    ).all()
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


def mark_delivered(connection: Connection, delivery_id: int, attempt: int, now: datetime) -> bool:
    """Mark a pending delivery done; False if it was not pending (someone got there first)."""
    result = connection.execute(
        update(deliveries)
        .where(deliveries.c.id == delivery_id, deliveries.c.status == "pending")
        .values(
            status="delivered",
            attempts=attempt,
            last_error=None,
            next_attempt_at=None,
            delivered_at=now,
            updated_at=now,
        )
    )
    return result.rowcount == 1


def record_failure(
    connection: Connection,
    delivery_id: int,
    attempt: int,
    error: str,
    now: datetime,
    retry_at: datetime | None,
) -> None:
    """Count a failed attempt; with no ``retry_at`` the delivery is dead."""
    connection.execute(
        update(deliveries)
        .where(deliveries.c.id == delivery_id, deliveries.c.status == "pending")
        .values(
            status="pending" if retry_at is not None else "dead",
            attempts=attempt,
            last_error=error[:4000],
            next_attempt_at=retry_at,
            updated_at=now,
        )
    )


def save_checkpoint(
    connection: Connection, delivery_id: int, checkpoint: dict[str, Any], now: datetime
) -> None:
    connection.execute(
        update(deliveries)
        .where(deliveries.c.id == delivery_id)
        .values(checkpoint=checkpoint, updated_at=now)
    )


def revive_dead(
    connection: Connection, signal_id: str, now: datetime, receptor: str | None = None
) -> list[str]:
    """Make dead deliveries of a signal pending again (attempts reset); the receptors revived."""
    condition = and_(deliveries.c.signal_id == signal_id, deliveries.c.status == "dead")
    if receptor is not None:
        condition = and_(condition, deliveries.c.receptor == receptor)
    revived = list(connection.execute(select(deliveries.c.receptor).where(condition)).scalars())
    if revived:
        connection.execute(
            update(deliveries)
            .where(condition)
            .values(status="pending", attempts=0, next_attempt_at=None, updated_at=now)
        )
    return revived


def get_signal(connection: Connection, signal_id: str) -> dict[str, Any] | None:
    """A stored signal with its deliveries, as plain data."""
    row = connection.execute(select(signals).where(signals.c.id == signal_id)).first()
    if row is None:
        return None
    result = signal_from_row(row).to_json_dict()
    result["stored_at"] = row.stored_at
    result["deliveries"] = [
        dict(d._mapping)
        for d in connection.execute(
            select(
                deliveries.c.receptor,
                deliveries.c.status,
                deliveries.c.attempts,
                deliveries.c.last_error,
                deliveries.c.next_attempt_at,
                deliveries.c.delivered_at,
            )
            .where(deliveries.c.signal_id == signal_id)
            .order_by(deliveries.c.id)
        )
    ]
    return result


def signal_status(connection: Connection, signal_id: str) -> dict[str, str]:
    """Receptor -> delivery status for one signal."""
    rows = connection.execute(
        select(deliveries.c.receptor, deliveries.c.status).where(
            deliveries.c.signal_id == signal_id
        )
    )
    return {row.receptor: row.status for row in rows}


def list_signals(
    connection: Connection,
    *,
    status: str | None = None,
    signal_type: str | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Newest first. ``status`` is a delivery status, or ``unrouted`` (no deliveries at all)."""
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
            exists().where(deliveries.c.signal_id == signals.c.id, deliveries.c.status == status)
        )
    if signal_type is not None:
        query = query.where(signals.c.type == signal_type)
    rows = connection.execute(
        query.order_by(signals.c.stored_at.desc(), signals.c.id.desc()).limit(limit)
    ).all()
    ids = [row.id for row in rows]
    by_signal: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
    if ids:
        for d in connection.execute(
            select(
                deliveries.c.signal_id,
                deliveries.c.receptor,
                deliveries.c.status,
                deliveries.c.attempts,
                deliveries.c.last_error,
            )
            .where(deliveries.c.signal_id.in_(ids))
            .order_by(deliveries.c.id)
        ):
            by_signal[d.signal_id].append(
                {
                    "receptor": d.receptor,
                    "status": d.status,
                    "attempts": d.attempts,
                    "last_error": d.last_error,
                }
            )
    return [dict(row._mapping) | {"deliveries": by_signal[row.id]} for row in rows]


def delivery_counts(connection: Connection) -> dict[str, int]:
    """How many deliveries are in each status."""
    counts = dict.fromkeys(DELIVERY_STATUSES, 0)
    for status, count in connection.execute(
        select(deliveries.c.status, func.count()).group_by(deliveries.c.status)
    ):
        counts[status] = count
    return counts
