"""The statements every emit runs, with the driver's own statements: appending signals to
the log, and, for the receptors that apply inside the emit's transaction, reading and moving
their cursors under a savepoint.

SQLAlchemy Core costs more CPU per statement than the fsync it waits for (SPEC §12), so these
go straight to sqlite3 or psycopg, inside the transaction SQLAlchemy began, with values
encoded exactly as the tables' column types encode them (so Core reads them back
unchanged)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from operator import attrgetter
from typing import Any

from sqlalchemy import JSON, Select, Table
from sqlalchemy.engine import Connection, Dialect

from daemon.core.signal import Signal
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
_JSON_AT = tuple(i for i, n in enumerate(WRITTEN_COLUMNS) if isinstance(signals.c[n].type, JSON))
_INSTANTS_AT = tuple(
    i for i, n in enumerate(WRITTEN_COLUMNS) if isinstance(signals.c[n].type, UTCDateTime)
)
_SQLITE_INSERT = (
    f"INSERT INTO signals ({_COLUMNS}) VALUES ({', '.join(['?'] * len(WRITTEN_COLUMNS))})"
    " ON CONFLICT DO NOTHING RETURNING seq"
)
_POSTGRESQL_INSERT = (
    f"INSERT INTO signals ({_COLUMNS}) VALUES ({', '.join(['%s'] * len(WRITTEN_COLUMNS))})"
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


class Raw:
    """The driver's connection under a SQLAlchemy transaction, with ``?`` placeholders on
    every driver."""

    def __init__(self, connection: Connection) -> None:
        self.driver: Any = connection.connection.driver_connection
        self.sqlite = connection.dialect.name == "sqlite"

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        cursor = self.driver.cursor()
        cursor.execute(sql if self.sqlite else sql.replace("?", "%s"), parameters)
        return cursor

    def instant(self, value: datetime) -> Any:
        return _sqlite_instant(value) if self.sqlite else _aware(value)

    @contextmanager
    def savepoint(self, name: str) -> Iterator[None]:
        """Undo everything written inside on an exception (which goes on), keep it else."""
        self.execute(f"SAVEPOINT {name}").close()
        try:
            yield
        except BaseException:
            self.execute(f"ROLLBACK TO SAVEPOINT {name}").close()
            self.execute(f"RELEASE SAVEPOINT {name}").close()
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
    if not binds:
        return int(position)
    marks = ", ".join("?" * len(binds))
    cursor = raw.execute(
        f"SELECT 1 FROM signals WHERE type IN ({marks}) AND seq > ? AND seq < ? LIMIT 1",
        (*binds, max(position, since), below),
    )
    behind = cursor.fetchone() is not None
    cursor.close()
    return None if behind else int(position)


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


def insert_many_ignoring_duplicates(
    connection: Connection, table: Table, rows: Sequence[dict[str, Any]]
) -> None:
    """Insert ``rows`` (all with the same keys) in one driver ``executemany``, skipping any
    whose key is already stored; values are encoded by the columns' own types."""
    names = tuple(rows[0])
    sql, encoders = _prepared_insert(table, names, connection.dialect)
    values = [
        tuple(
            row[name] if encode is None else encode(row[name])
            for name, encode in zip(names, encoders, strict=True)
        )
        for row in rows
    ]
    Raw(connection).driver.cursor().executemany(sql, values)


@lru_cache(maxsize=64)
def _prepared_insert(
    table: Table, names: tuple[str, ...], dialect: Dialect
) -> tuple[str, list[Callable[[Any], Any] | None]]:
    quote = dialect.identifier_preparer.quote
    mark = "?" if dialect.name == "sqlite" else "%s"
    sql = (
        f"INSERT INTO {quote(table.name)} ({', '.join(quote(n) for n in names)})"
        f" VALUES ({', '.join([mark] * len(names))}) ON CONFLICT DO NOTHING"
    )
    return sql, [_encoder(table.c[name].type, dialect) for name in names]


def _encoder(column_type: Any, dialect: Dialect) -> Callable[[Any], Any] | None:
    encode: Callable[[Any], Any] | None = column_type.bind_processor(dialect)
    if encode is None and isinstance(column_type, JSON):
        # psycopg's dialect leaves JSON to a cast in the SQL it renders; here it is text.
        return json.dumps
    return encode


def select_rows(
    connection: Connection, statement: Select[Any], parameters: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """Run a prepared Core select of plain columns (text and numbers, no decoding) on the
    driver. Each list in ``parameters`` fills an expanding ``bindparam``; the SQL is
    compiled once per statement, parameter names and list lengths."""
    shape = tuple(
        sorted((k, len(v) if isinstance(v, list | tuple) else -1) for k, v in parameters.items())
    )
    sql, names, constants = _compiled_select(statement, connection.dialect, shape)
    given = dict(constants)
    for key, value in parameters.items():
        if isinstance(value, list | tuple):
            given.update({f"{key}_{n}": item for n, item in enumerate(value, start=1)})
        else:
            given[key] = value
    cursor = Raw(connection).driver.cursor()
    cursor.execute(sql, given if names is None else [given[name] for name in names])
    rows: list[tuple[Any, ...]] = cursor.fetchall()
    cursor.close()
    return rows


@lru_cache(maxsize=256)
def _compiled_select(
    statement: Select[Any], dialect: Dialect, shape: tuple[tuple[str, int], ...]
) -> tuple[str, tuple[str, ...] | None, tuple[tuple[str, Any], ...]]:
    """The SQL with every expanding list rendered as that many placeholders; for positional
    drivers, the parameter names in placeholder order; and the values the statement itself
    carries (literal ``IN`` lists)."""
    placeholders = {name: list(range(n)) if n >= 0 else None for name, n in shape}
    expanded = statement.compile(dialect=dialect).construct_expanded_state(placeholders)
    ours = {name for name, _ in shape}
    constants = tuple(
        (name, value)
        for name, value in expanded.parameters.items()
        if name not in ours and name.rsplit("_", 1)[0] not in ours
    )
    names = tuple(expanded.positiontup) if expanded.positiontup is not None else None
    return expanded.statement, names, constants


def _values(signal: Signal, stored_at: datetime, instant: Any) -> tuple[Any, ...]:
    values = list(_ATTRIBUTES(signal))
    values.insert(_STORED_AT, stored_at)
    for i in _JSON_AT:
        values[i] = json.dumps(values[i], ensure_ascii=False, separators=(",", ":"))
    for i in _INSTANTS_AT:
        values[i] = instant(values[i])
    return tuple(values)


def _sqlite_instant(value: datetime) -> str:
    # SQLAlchemy's SQLite DATETIME storage format, in UTC as UTCDateTime stores it.
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _aware(value: datetime) -> datetime:
    return value.astimezone(UTC)
