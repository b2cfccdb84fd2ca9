"""A receptor's deliveries of the log's signals, derived from its cursor and the exceptions
to it (``delivery_failures``); a delivery is never a row of its own unless something went
wrong:

- ``seq <= since``, or a type it does not bind: not its signal;
- a ``delivery_failures`` row: what that row says (``pending`` with attempts and the last
  error, ``dead``, ``delivered`` after failing, or ``discarded``: dead and given up on by a
  person, who is named in place of its checkpoint since it is never delivered again);
- otherwise ``seq <= position``: delivered; above it: pending.

:class:`Deliveries` hands out what a receptor has to deliver next, settles it, records its
failures and checkpoints, and answers where each signal is with each receptor."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, false, func, or_, select, update

from daemon.core.clock import iso
from daemon.core.signal import Signal
from daemon.store.cursors import Cursor, ReceptorCursors
from daemon.store.fast_path import Raw
from daemon.store.signal_rows import READ_COLUMNS, signal_from_row, signals
from daemon.store.sql import text_for_store, upsert
from daemon.store.tables import DeliveryFailureTable

failures = DeliveryFailureTable.__table__  # type: ignore[attr-defined]

MAX_ERROR_CHARS = 4000


@dataclass(frozen=True)
class Delivery:
    """A signal a receptor has still to settle. ``attempts`` counts the failed ones so far;
    a ``revived`` delivery lies below the cursor (a dead one retried by hand)."""

    seq: int
    receptor: str
    attempts: int
    checkpoint: dict[str, Any] | None
    signal: Signal
    revived: bool = False


@dataclass(frozen=True)
class DeliveryState:
    """Where one receptor is with one signal."""

    receptor: str
    status: str  # pending | delivered | dead | discarded
    attempts: int
    last_error: str | None
    next_attempt_at: datetime | None = None
    delivered_at: datetime | None = None
    discarded: Discarded | None = None

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
        if self.discarded is not None:
            shown["discarded"] = self.discarded.to_json()
        return shown


@dataclass(frozen=True)
class Discarded:
    """Who gave up on a dead delivery, when, and the signal that says so."""

    by: str
    at: datetime
    signal_id: str

    def to_json(self) -> dict[str, str]:
        return {"by": self.by, "at": iso(self.at), "signal_id": self.signal_id}


@dataclass(frozen=True)
class DeliveryCounts:
    """Open deliveries: waiting to be delivered, and given up on."""

    pending: int = 0
    dead: int = 0


def _iso_or_none(value: datetime | None) -> str | None:
    return None if value is None else iso(value)


class Deliveries(ReceptorCursors):
    """Every operation on the receptors' deliveries, inside the transaction of
    ``connection`` (with the cursors they are counted from)."""

    def next_deliveries(self, receptor: str, limit: int) -> tuple[int, list[Delivery]]:
        """The receptor's cursor and what it has to deliver next, in log order: first the
        revived deliveries below the cursor, then the log after it."""
        cursor = self.cursor(receptor)
        if cursor is None or not cursor.binds:
            return (0 if cursor is None else cursor.position), []
        revived = self.connection.execute(
            select(failures.c.attempts, failures.c.checkpoint, *READ_COLUMNS)
            .join(signals, signals.c.seq == failures.c.seq)
            .where(
                failures.c.receptor == receptor,
                failures.c.status == "pending",
                failures.c.seq <= cursor.position,
            )
            .order_by(failures.c.seq)
            .limit(limit)
        ).all()
        if revived:
            return cursor.position, [_delivery(receptor, row, revived=True) for row in revived]
        after = (
            select(*READ_COLUMNS)
            .where(
                signals.c.type.in_(sorted(cursor.binds)),
                signals.c.seq > max(cursor.position, cursor.since),
            )
            .order_by(signals.c.seq)
            .limit(limit)
            .subquery()
        )
        rows = self.connection.execute(
            select(after, failures.c.attempts, failures.c.checkpoint)
            .outerjoin(
                failures, and_(failures.c.receptor == receptor, failures.c.seq == after.c.seq)
            )
            .order_by(after.c.seq)
        ).all()
        return cursor.position, [_delivery(receptor, row) for row in rows]

    def settle(
        self, receptor: str, deliveries: Sequence[Delivery], position: int, now: datetime
    ) -> bool:
        """Count ``deliveries`` (consecutive, from the cursor at ``position``, or one revived
        delivery) as delivered; False if any of them is no longer the receptor's to settle,
        and then nothing must be written."""
        if deliveries[0].revived:
            [delivery] = deliveries
            result = self.connection.execute(
                _mark_failures_delivered(receptor, now).where(
                    failures.c.seq == delivery.seq, failures.c.status == "pending"
                )
            )
            return result.rowcount == 1
        if not self.advance(receptor, position, deliveries[-1].seq, now):
            return False
        # Failed attempts and checkpoints (saved during this very attempt, too) end here.
        self.connection.execute(
            _mark_failures_delivered(receptor, now).where(
                failures.c.seq > position,
                failures.c.seq <= deliveries[-1].seq,
                failures.c.status == "pending",
            )
        )
        return True

    def record_failure(
        self,
        delivery: Delivery,
        position: int,
        error: str,
        now: datetime,
        retry_at: datetime | None,
    ) -> bool:
        """Count a failed attempt; with no ``retry_at`` the delivery is dead and the cursor
        moves past it (a dead delivery never holds back the ones after it). The error is
        stored in a form every store accepts (no NUL, bounded). False, and nothing written,
        if the delivery was settled elsewhere meanwhile."""
        if not self._still_open(delivery):
            return False
        values = {
            "status": "pending" if retry_at is not None else "dead",
            "attempts": delivery.attempts + 1,
            "last_error": text_for_store(error, MAX_ERROR_CHARS),
            "next_attempt_at": retry_at,
            "updated_at": now,
        }
        self._upsert_failure(delivery, values)
        if retry_at is None and not delivery.revived:
            self.advance(delivery.receptor, position, delivery.seq, now)
        return True

    def _still_open(self, delivery: Delivery) -> bool:
        if delivery.revived:
            status = self.connection.execute(
                select(failures.c.status).where(
                    failures.c.receptor == delivery.receptor, failures.c.seq == delivery.seq
                )
            ).scalar()
            return status == "pending"
        cursor = self.cursor(delivery.receptor)
        return cursor is not None and cursor.position < delivery.seq

    def save_checkpoint(
        self, delivery: Delivery, checkpoint: dict[str, Any], now: datetime
    ) -> None:
        self._upsert_failure(
            delivery,
            {
                "status": "pending",
                "attempts": delivery.attempts,
                "checkpoint": checkpoint,
                "updated_at": now,
            },
        )

    def _upsert_failure(self, delivery: Delivery, values: dict[str, Any]) -> None:
        key = {"receptor": delivery.receptor, "seq": delivery.seq}
        self.connection.execute(
            upsert(failures, self.connection.dialect.name, ["receptor", "seq"], list(values)),
            key | {"signal_id": delivery.signal.id, "checkpoint": delivery.checkpoint} | values,
        )

    def redact_failures(self, redact: Callable[[Any], Any]) -> int:
        """Pass every delivery's saved checkpoint and last error through ``redact``
        (``memory.forget``) and store what changed; how many deliveries did."""
        rows = self.connection.execute(
            select(
                failures.c.receptor, failures.c.seq, failures.c.checkpoint, failures.c.last_error
            )
        ).all()
        changed = 0
        for row in rows:
            checkpoint, error = redact(row.checkpoint), redact(row.last_error)
            if checkpoint != row.checkpoint or error != row.last_error:
                self.connection.execute(
                    update(failures)
                    .where(failures.c.receptor == row.receptor, failures.c.seq == row.seq)
                    .values(checkpoint=checkpoint, last_error=error)
                )
                changed += 1
        return changed

    def revive_dead(self, signal_id: str, now: datetime, receptor: str | None = None) -> list[str]:
        """Make dead deliveries of a signal pending again (attempts reset); the receptors
        revived."""
        condition = and_(failures.c.signal_id == signal_id, failures.c.status == "dead")
        if receptor is not None:
            condition = and_(condition, failures.c.receptor == receptor)
        revived = list(
            self.connection.execute(
                select(failures.c.receptor).where(condition).order_by(failures.c.receptor)
            ).scalars()
        )
        if revived:
            self.connection.execute(
                update(failures)
                .where(condition)
                .values(status="pending", attempts=0, next_attempt_at=None, updated_at=now)
            )
        return revived

    def count_dead(self, signal_id: str | None, receptor: str | None) -> int:
        """How many dead deliveries there are of ``signal_id`` (every signal's, if None) to
        ``receptor`` (every receptor's, if None)."""
        return int(
            self.connection.execute(
                select(func.count()).where(_dead(signal_id, receptor))
            ).scalar_one()
        )

    def discard_dead(
        self, signal_id: str | None, receptor: str | None, by: str, at: datetime, discard_id: str
    ) -> int:
        """Give up on the dead deliveries :meth:`count_dead` counts that died by ``at``, for
        ``by`` (the signal ``discard_id`` says so): they are not retried again and no longer
        count as dead. How many."""
        result = self.connection.execute(
            update(failures)
            .where(_dead(signal_id, receptor), failures.c.updated_at <= at)
            .values(
                status="discarded",
                next_attempt_at=None,
                checkpoint={"discarded": {"by": by, "signal_id": discard_id}},
                updated_at=at,
            )
        )
        return int(result.rowcount)

    def _having_status(self, status: str) -> ColumnElement[bool]:
        def failure(*conditions: ColumnElement[bool]) -> ColumnElement[bool]:
            return (
                select(failures.c.seq).where(failures.c.seq == signals.c.seq, *conditions).exists()
            )

        def owned(cursor: Cursor) -> ColumnElement[bool]:
            return and_(signals.c.type.in_(sorted(cursor.binds)), signals.c.seq > cursor.since)

        every = [c for c in self.cursors() if c.binds]
        if status in ("dead", "discarded"):
            return failure(failures.c.status == status)
        if status == "pending":
            return or_(
                failure(failures.c.status == "pending"),
                *(and_(owned(c), signals.c.seq > c.position) for c in every),
            )
        if status == "delivered":
            return or_(
                failure(failures.c.status == "delivered"),
                *(
                    and_(
                        owned(c),
                        signals.c.seq <= c.position,
                        ~failure(failures.c.receptor == c.receptor),
                    )
                    for c in every
                ),
            )
        if status == "unrouted":
            return and_(~failure(), *(~owned(c) for c in every))
        return false()

    def _states(self, signals_: Sequence[tuple[int, str]]) -> dict[int, list[DeliveryState]]:
        """Each signal's delivery states, derived from the cursors and the failure rows."""
        states: dict[int, list[DeliveryState]] = {seq: [] for seq, _ in signals_}
        if not signals_:
            return states
        rows = self.connection.execute(
            select(failures).where(failures.c.seq.in_([seq for seq, _ in signals_]))
        ).all()
        exceptions = {(row.seq, row.receptor): row for row in rows}
        every = self.cursors()
        for seq, signal_type in signals_:
            for cursor in every:
                row = exceptions.get((seq, cursor.receptor))
                if row is not None:
                    states[seq].append(_state_of_failure(row))
                elif cursor.owns(seq, signal_type):
                    delivered = seq <= cursor.position
                    states[seq].append(
                        DeliveryState(
                            cursor.receptor,
                            "delivered" if delivered else "pending",
                            1 if delivered else 0,
                            None,
                        )
                    )
        return states

    def open_counts(self) -> DeliveryCounts:
        """How many deliveries are pending and dead, in one statement (health asks often):
        what lies after each cursor (through the type index), the revived deliveries below
        it, and the dead ones."""
        parts: list[str] = []
        parameters: list[Any] = []
        for cursor in self.cursors():
            if cursor.binds:
                marks = ", ".join("?" * len(cursor.binds))
                parts.append(f"(SELECT count(*) FROM signals WHERE type IN ({marks}) AND seq > ?)")
                parameters += [*sorted(cursor.binds), max(cursor.position, cursor.since)]
        parts.append(
            "(SELECT count(*) FROM delivery_failures f JOIN receptor_cursors c"
            " ON c.receptor = f.receptor WHERE f.status = 'pending' AND f.seq <= c.position)"
        )
        sql = (
            f"SELECT {' + '.join(parts)},"
            " (SELECT count(*) FROM delivery_failures WHERE status = 'dead')"
        )
        raw = Raw(self.connection).execute(sql, parameters)
        pending, dead = raw.fetchone()
        raw.close()
        return DeliveryCounts(pending=int(pending), dead=int(dead))


def _mark_failures_delivered(receptor: str, now: datetime) -> Any:
    return (
        update(failures)
        .where(failures.c.receptor == receptor)
        .values(
            status="delivered",
            attempts=failures.c.attempts + 1,
            last_error=None,
            next_attempt_at=None,
            updated_at=now,
        )
    )


def _dead(signal_id: str | None, receptor: str | None) -> ColumnElement[bool]:
    conditions: list[ColumnElement[bool]] = [failures.c.status == "dead"]
    if signal_id is not None:
        conditions.append(failures.c.signal_id == signal_id)
    if receptor is not None:
        conditions.append(failures.c.receptor == receptor)
    return and_(*conditions)


def _delivery(receptor: str, row: Row[Any], *, revived: bool = False) -> Delivery:
    return Delivery(
        seq=row.seq,
        receptor=receptor,
        attempts=row.attempts or 0,
        checkpoint=row.checkpoint,
        signal=signal_from_row(row),
        revived=revived,
    )


def _state_of_failure(row: Row[Any]) -> DeliveryState:
    discarded = None
    if row.status == "discarded":
        given_up = (row.checkpoint or {}).get("discarded", {})
        discarded = Discarded(given_up.get("by", ""), row.updated_at, given_up.get("signal_id", ""))
    return DeliveryState(
        receptor=row.receptor,
        status=row.status,
        attempts=row.attempts,
        last_error=row.last_error,
        next_attempt_at=row.next_attempt_at,
        delivered_at=row.updated_at if row.status == "delivered" else None,
        discarded=discarded,
    )
