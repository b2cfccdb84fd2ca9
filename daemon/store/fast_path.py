"""The statements every emit runs, with the driver's own statements: appending signals to
the log, and, for the receptors that apply inside the emit's transaction, reading and moving
their cursors under a savepoint.

SQLAlchemy Core costs more CPU per statement than the fsync it waits for (SPEC §12), so these
go straight to sqlite3 or psycopg, inside the transaction SQLAlchemy began, with values
encoded exactly as the tables' column types encode them (so Core reads them back
unchanged)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any, NoReturn

from sqlalchemy import JSON, Table
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from daemon.core.json_text import json_text
from daemon.core.signal import Signal
from daemon.store.recent_marks import mirror_of
from daemon.store.signal_rows import WRITTEN_COLUMNS, signals
from daemon.store.tables import UTCDateTime

APPEND_LOCK_KEY = 0x63616D6269756D  # "cambium"
# An append that leaves work for a worker is announced on this channel when it commits
# (PostgreSQL): the fleet's daemons wake the workers of the receptors they own.
APPENDED_CHANNEL = "cambium_appended"

# The table's columns, in its order; each one's value is the signal's attribute of that name
# (``class`` is a Python keyword, so the attribute is ``signal_class``), but ``stored_at``.
_COLUMNS = ", ".join(WRITTEN_COLUMNS)
_ATTRIBUTES = attrgetter(
    *(("signal_class" if n == "class" else n) for n in WRITTEN_COLUMNS if n != "stored_at")
)
_STORED_AT = WRITTEN_COLUMNS.index("stored_at")


class Encoding:
    """How a row of ``table``'s columns ``names`` is written on the driver: the JSON
    columns as compact text, the instants as the column type stores them (SQLite: UTC
    text)."""

    def __init__(self, table: Table, names: Sequence[str]) -> None:
        kinds = [table.c[name].type for name in names]
        self.json_at = tuple(i for i, kind in enumerate(kinds) if isinstance(kind, JSON))
        self.instants_at = tuple(i for i, kind in enumerate(kinds) if isinstance(kind, UTCDateTime))

    def encode(self, values: list[Any], instant: Callable[[datetime], Any]) -> list[Any]:
        for i in self.json_at:
            values[i] = json_text(values[i])
        for i in self.instants_at:
            if values[i] is not None:
                values[i] = instant(values[i])
        return values


_ENCODING = Encoding(signals, WRITTEN_COLUMNS)
_SQLITE_INSERT = (
    f"INSERT INTO signals ({_COLUMNS}) VALUES ({', '.join(['?'] * len(WRITTEN_COLUMNS))})"
    " ON CONFLICT DO NOTHING RETURNING seq"
)
_POSTGRESQL_INSERT = (
    f"INSERT INTO signals ({_COLUMNS}) VALUES ({', '.join(['%s'] * len(WRITTEN_COLUMNS))})"
    " ON CONFLICT DO NOTHING RETURNING seq"
)


def raise_as_sqlalchemy(connection: Connection, statement: str, exc: Exception) -> NoReturn:
    """Raise the driver's error as SQLAlchemy raises it (a DBAPIError of the right kind): the
    writer runs a deadlock's victim again and tells a full disk from a bad statement, the
    API answers 503, as for any statement that went through SQLAlchemy. Anything else goes
    on as it is."""
    base: type[Exception] = connection.dialect.loaded_dbapi.Error
    if isinstance(exc, base):
        raise DBAPIError.instance(statement, None, exc, base) from exc
    raise exc


def insert_signals(
    connection: Connection, signals: Sequence[tuple[Signal, datetime]]
) -> list[int | None]:
    """Insert each ``(signal, stored_at)`` unless its id or idempotency key is stored; each
    one's new sequence number, or None where it was skipped."""
    try:
        return _insert_signals(connection, signals)
    except Exception as exc:
        raise_as_sqlalchemy(connection, "INSERT INTO signals", exc)


def _insert_signals(
    connection: Connection, signals: Sequence[tuple[Signal, datetime]]
) -> list[int | None]:
    driver: Any = connection.connection.driver_connection
    if connection.dialect.name == "sqlite":
        cursor = driver.cursor()
        seqs: list[int | None] = []
        instant = memo(_sqlite_instant)
        for signal, stored_at in signals:
            cursor.execute(_SQLITE_INSERT, _values(signal, stored_at, instant))
            row = cursor.fetchone()
            seqs.append(None if row is None else row[0])
        cursor.close()
        return seqs
    with driver.cursor() as cursor:
        # Appends take turns fleet-wide, so the sequence is commit order for every reader:
        # no cursor can pass a number whose transaction has yet to commit.
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK_KEY,))
        instant = memo(_aware)
        cursor.executemany(
            _POSTGRESQL_INSERT,
            [_values(signal, stored_at, instant) for signal, stored_at in signals],
            returning=True,
        )
        seqs = []
        while True:
            row = cursor.fetchone()
            seqs.append(None if row is None else row[0])
            if not cursor.nextset():
                break
        return seqs


class Raw:
    """The driver's connection under a SQLAlchemy transaction, with ``?`` placeholders on
    every driver."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.driver: Any = connection.connection.driver_connection
        self.sqlite = connection.dialect.name == "sqlite"

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        cursor = self.driver.cursor()
        try:  # (no context manager: a generator's costs more than the statement)
            cursor.execute(sql if self.sqlite else sql.replace("?", "%s"), parameters)
        except Exception as exc:
            raise_as_sqlalchemy(self.connection, sql, exc)
        return cursor

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        cursor = self.driver.cursor()
        try:
            cursor.executemany(sql if self.sqlite else sql.replace("?", "%s"), rows)
        except Exception as exc:
            raise_as_sqlalchemy(self.connection, sql, exc)
        cursor.close()

    def instant(self, value: datetime) -> Any:
        return _sqlite_instant(value) if self.sqlite else _aware(value)

    @contextmanager
    def savepoint(self, name: str) -> Iterator[None]:
        """Undo everything written inside on an exception (which goes on), keep it else."""
        mirror = mirror_of(self.connection) if self.sqlite else None
        undo_to = 0 if mirror is None else mirror.savepoint()
        self.execute(f"SAVEPOINT {name}").close()
        try:
            yield
        except BaseException:
            self.execute(f"ROLLBACK TO SAVEPOINT {name}").close()
            self.execute(f"RELEASE SAVEPOINT {name}").close()
            if mirror is not None:
                mirror.rollback_to(undo_to)
            raise
        self.execute(f"RELEASE SAVEPOINT {name}").close()


def backlog_free_position(
    connection: Connection, receptor: str, binds: Sequence[str], below: int
) -> int | None:
    """The receptor's cursor, if none of its signals lies between it and ``below``."""
    raw = Raw(connection)
    cursor = raw.execute(
        "SELECT position, since FROM receptor_cursors WHERE receptor = ?", (receptor,)
    )
    row = cursor.fetchone()
    cursor.close()
    if row is None:
        return None
    position, since = row
    if not binds or max(position, since) >= below - 1:  # (nothing lies in between)
        return int(position)
    marks = ", ".join("?" * len(binds))
    cursor = raw.execute(
        f"SELECT 1 FROM signals WHERE type IN ({marks}) AND seq > ? AND seq < ? LIMIT 1",
        (*binds, max(position, since), below),
    )
    behind = cursor.fetchone() is not None
    cursor.close()
    return None if behind else int(position)


def pass_over(
    connection: Connection, receptors: Sequence[str], before: int, to: int, now: datetime
) -> None:
    """Move the cursors of ``receptors`` that are at ``before`` to ``to``."""
    raw = Raw(connection)
    marks = ", ".join("?" * len(receptors))
    raw.execute(
        "UPDATE receptor_cursors SET position = ?, updated_at = ?"
        f" WHERE position = ? AND receptor IN ({marks})",
        (to, raw.instant(now), before, *receptors),
    ).close()


def advance_cursor(
    connection: Connection, receptor: str, position: int, to: int, now: datetime
) -> bool:
    """Move the cursor from ``position`` to ``to``; False if it was not at ``position``."""
    raw = Raw(connection)
    cursor = raw.execute(
        "UPDATE receptor_cursors SET position = ?, updated_at = ?"
        " WHERE receptor = ? AND position = ?",
        (to, raw.instant(now), receptor, position),
    )
    moved = cursor.rowcount == 1
    cursor.close()
    return bool(moved)


def _values(
    signal: Signal, stored_at: datetime, instant: Callable[[datetime], Any]
) -> tuple[Any, ...]:
    values = list(_ATTRIBUTES(signal))
    values.insert(_STORED_AT, stored_at)
    return tuple(_ENCODING.encode(values, instant))


def memo(format_instant: Callable[[datetime], Any]) -> Callable[[datetime], Any]:
    """``format_instant``, each distinct instant formatted once (a batch's signals share
    their ``stored_at``; a mark's four instants are often one)."""
    done: dict[datetime, Any] = {}

    def formatted(value: datetime) -> Any:
        found = done.get(value)
        if found is None:
            found = done[value] = format_instant(value)
        return found

    return formatted


def _sqlite_instant(value: datetime) -> str:
    # SQLAlchemy's SQLite DATETIME storage format (a four-digit year, six digits of
    # microseconds), in UTC as UTCDateTime stores it; isoformat takes half strftime's time.
    return value.astimezone(UTC).isoformat(" ", "microseconds")[:26]


def _aware(value: datetime) -> datetime:
    return value.astimezone(UTC)
