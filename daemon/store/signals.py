"""The signal log: the ``signals`` table (append-only, ``seq`` in commit order), one cursor per
receptor (``receptor_cursors``) and the exceptions to it (``delivery_failures``).

A receptor's delivery of a signal is never a row of its own unless something went wrong:

- ``seq <= since``, or a type it does not bind: not its signal;
- a ``delivery_failures`` row: what that row says (``pending`` with attempts and the last
  error, ``dead``, or ``delivered`` after failing);
- otherwise ``seq <= position``: delivered; above it: pending.

:class:`SignalLog` names every operation on these tables once and returns typed records; the
bus, the API, the CLI and the tests call it inside a transaction the
:class:`~daemon.store.engine.Store` hands them. Appending, the hot path, goes through the
driver's own prepared statements (:mod:`daemon.store.fast_path`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Row,
    and_,
    bindparam,
    false,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection

from daemon.core.clock import iso
from daemon.core.signal import Signal
from daemon.store.fast_path import (
    APPENDED_CHANNEL,
    Raw,
    advance_cursor,
    backlog_free_position,
    insert_signals,
)
from daemon.store.sql import (
    in_chunks,
    insert_ignoring_duplicates,
    text_for_store,
    upsert,
    with_instants,
)
from daemon.store.tables import DeliveryFailureTable, ReceptorCursorTable, SignalTable

signals = SignalTable.__table__  # type: ignore[attr-defined]
cursors = ReceptorCursorTable.__table__  # type: ignore[attr-defined]
failures = DeliveryFailureTable.__table__  # type: ignore[attr-defined]

DELIVERY_STATES = ("pending", "delivered", "dead")
MAX_ERROR_CHARS = 4000


class DeliveriesPending(RuntimeError):
    """An import was refused: receptors have signals left to deliver."""


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
class Cursor:
    """Where a receptor is in the log."""

    receptor: str
    binds: frozenset[str]
    since: int
    position: int

    def owns(self, seq: int, signal_type: str) -> bool:
        return seq > self.since and signal_type in self.binds


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


@dataclass(frozen=True)
class DeliveryCounts:
    """Open deliveries: waiting to be delivered, and given up on."""

    pending: int = 0
    dead: int = 0


def _iso_or_none(value: datetime | None) -> str | None:
    return None if value is None else iso(value)


_SIGNAL_COLUMNS = [c for c in signals.c if c.name != "stored_at"]
_SUMMARY_COLUMNS = (
    signals.c.id,
    signals.c.seq,
    signals.c.type,
    signals.c.source_id,
    signals.c.workspace_id,
    signals.c.emitted_at,
    signals.c.stored_at,
)


# Built once: every worker's read starts with it, and building a statement costs more than
# running it.
_CURSOR = select(cursors).where(cursors.c.receptor == bindparam("receptor"))


class SignalLog:
    """Every operation on the signal log, inside the transaction of ``connection``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

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
        return int(
            self.connection.execute(select(func.coalesce(func.max(signals.c.seq), 0))).one()[0]
        )

    # -- cursors --------------------------------------------------------------------------

    def register(self, receptor: str, binds: Iterable[str], now: datetime) -> Cursor:
        """Make sure ``receptor`` has a cursor and binds ``binds``. A new receptor starts at
        the head: what was stored before it existed is not its to deliver."""
        head = self.head()
        self.connection.execute(
            insert_ignoring_duplicates(cursors, self.connection.dialect.name),
            {
                "receptor": receptor,
                "binds": sorted(binds),
                "since": head,
                "position": head,
                "updated_at": now,
            },
        )
        self.connection.execute(
            update(cursors).where(cursors.c.receptor == receptor).values(binds=sorted(binds))
        )
        found = self.cursor(receptor)
        assert found is not None
        return found

    def cursor(self, receptor: str) -> Cursor | None:
        row = self.connection.execute(_CURSOR, {"receptor": receptor}).first()
        return None if row is None else _cursor(row)

    def cursors(self) -> list[Cursor]:
        rows = self.connection.execute(select(cursors).order_by(cursors.c.receptor))
        return [_cursor(row) for row in rows]

    def advance(self, receptor: str, position: int, to: int, now: datetime) -> bool:
        """Move the cursor from ``position`` to ``to``; False if it was not at ``position``
        (another worker or daemon moved it: the caller's work must not count)."""
        return advance_cursor(self.connection, receptor, position, to, now)

    def backlog_free_position(self, receptor: str, binds: Iterable[str], below: int) -> int | None:
        """The receptor's cursor if none of its signals (of ``binds``) lies between it and
        ``below``; None if some do, or it has no cursor."""
        return backlog_free_position(self.connection, receptor, sorted(binds), below)

    def savepoint(self) -> AbstractContextManager[None]:
        """Writes inside are undone if it raises (the exception goes on)."""
        return Raw(self.connection).savepoint("inline")

    # -- leases (a fleet of daemons on PostgreSQL) ----------------------------------------

    def take_lease(self, receptor: str, owner: str, now: datetime, until: datetime) -> bool:
        """Own ``receptor`` until ``until``: renew a lease ``owner`` holds, or take one that
        is free or expired. False if another owner holds it."""
        result = self.connection.execute(
            update(cursors)
            .where(
                cursors.c.receptor == receptor,
                or_(
                    cursors.c.owner.is_(None),
                    cursors.c.owner == owner,
                    cursors.c.lease_until < now,
                ),
            )
            .values(owner=owner, lease_until=until)
        )
        return result.rowcount == 1

    def release_leases(self, owner: str) -> None:
        """Give up every lease ``owner`` holds (at a clean stop: others take over at once)."""
        self.connection.execute(
            update(cursors).where(cursors.c.owner == owner).values(owner=None, lease_until=None)
        )

    def owners(self) -> dict[str, str | None]:
        """Receptor -> the daemon holding its lease (None: free)."""
        rows = self.connection.execute(select(cursors.c.receptor, cursors.c.owner))
        return {receptor: owner for receptor, owner in rows}

    # -- delivering -----------------------------------------------------------------------

    def next_deliveries(self, receptor: str, limit: int) -> tuple[int, list[Delivery]]:
        """The receptor's cursor and what it has to deliver next, in log order: first the
        revived deliveries below the cursor, then the log after it."""
        cursor = self.cursor(receptor)
        if cursor is None or not cursor.binds:
            return (0 if cursor is None else cursor.position), []
        revived = self.connection.execute(
            select(failures.c.attempts, failures.c.checkpoint, *_SIGNAL_COLUMNS)
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
            select(*_SIGNAL_COLUMNS)
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

    def _having_status(self, status: str) -> ColumnElement[bool]:
        def failure(*conditions: ColumnElement[bool]) -> ColumnElement[bool]:
            return (
                select(failures.c.seq).where(failures.c.seq == signals.c.seq, *conditions).exists()
            )

        def owned(cursor: Cursor) -> ColumnElement[bool]:
            return and_(signals.c.type.in_(sorted(cursor.binds)), signals.c.seq > cursor.since)

        every = [c for c in self.cursors() if c.binds]
        if status == "dead":
            return failure(failures.c.status == "dead")
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

    def all_rows(self) -> list[dict[str, Any]]:
        """Every signal as its column mapping, in log order (for export)."""
        query = select(*[c for c in signals.c if c.name != "seq"]).order_by(signals.c.seq)
        return [dict(r._mapping) for r in self.connection.execute(query)]

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


def _cursor(row: Row[Any]) -> Cursor:
    return Cursor(
        receptor=row.receptor,
        binds=frozenset(row.binds),
        since=row.since,
        position=row.position,
    )


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
    return DeliveryState(
        receptor=row.receptor,
        status=row.status,
        attempts=row.attempts,
        last_error=row.last_error,
        next_attempt_at=row.next_attempt_at,
        delivered_at=row.updated_at if row.status == "delivered" else None,
    )


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
